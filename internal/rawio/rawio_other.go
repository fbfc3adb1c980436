//go:build !unix

package rawio

import "syscall"

// Without Unix descriptors Conn and File return nil, and callers use the
// connection's or file's own Read and Write.
const supported = false

func read(fd uintptr, p []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func write(fd uintptr, p []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
func writev(fd uintptr, iov *[2]iovec, a, b []byte) (int, syscall.Errno) {
	return 0, syscall.ENOSYS
}
func peek(fd uintptr, b *byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
func isNonblocking(fd uintptr) bool                 { return false }

type iovec struct{}
