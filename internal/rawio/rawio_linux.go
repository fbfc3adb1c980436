package rawio

import (
	"syscall"
	"unsafe"
)

const supported = true

// read and write are read(2) and write(2) without the scheduler's
// entersyscall and exitsyscall (the package comment says why). They are
// made only on nonblocking descriptors, which never block.
func read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), errno
}

func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// writev is writev(2) of a and b, through iov.
func writev(fd uintptr, iov *[2]iovec, a, b []byte) (int, syscall.Errno) {
	iov[0].Base, iov[1].Base = unsafe.SliceData(a), unsafe.SliceData(b)
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(iov)), 2)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// peek is recv(2) of one byte with MSG_PEEK|MSG_DONTWAIT: it takes nothing
// and never waits.
func peek(fd uintptr, b *byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(b)), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}

// isNonblocking reports whether fd has O_NONBLOCK set.
func isNonblocking(fd uintptr) bool {
	flags, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}

// iovec is writev(2)'s buffer description.
type iovec = syscall.Iovec
