//go:build !unix

package mediastore

// oNoFollow is zero where O_NOFOLLOW does not exist; os.Root still keeps
// every open inside the directory.
const oNoFollow = 0
