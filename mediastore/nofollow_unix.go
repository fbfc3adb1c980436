//go:build unix

package mediastore

import "syscall"

// oNoFollow makes opening a file fail on a symbolic link.
const oNoFollow = syscall.O_NOFOLLOW
