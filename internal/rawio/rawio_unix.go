//go:build unix && !linux

package rawio

import (
	"syscall"
	"unsafe"
)

// On other Unix systems than Linux the calls go through package syscall,
// not raw: FD behaves the same (TryWrite, Writev, the errors), without
// the saving the package comment describes, which was measured on Linux
// only.
const supported = true

func read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errno(err)
}

func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errno(err)
}

// writev writes a alone (when it has bytes) or b: Writev's loop goes on
// from wherever a write ends.
func writev(fd uintptr, iov *[2]iovec, a, b []byte) (int, syscall.Errno) {
	if len(a) > 0 {
		return write(fd, a)
	}
	return write(fd, b)
}

func peek(fd uintptr, b *byte) (int, syscall.Errno) {
	n, _, err := syscall.Recvfrom(int(fd), unsafe.Slice(b, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return max(n, 0), errno(err)
}

func isNonblocking(fd uintptr) bool {
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return e == 0 && flags&syscall.O_NONBLOCK != 0
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}

type iovec struct{}
