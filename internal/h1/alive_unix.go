//go:build unix

package h1

import (
	"errors"
	"syscall"
)

// alive reports whether an idle connection can carry a request: the server
// has neither closed it nor sent anything on it (an idle connection has
// nothing to read; its buffer was empty when it went idle). It peeks
// without blocking, one system call, so that a server's idle timeout does
// not fail the next request.
func (c *conn) alive() bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var rerr error
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		// No error is a byte or the end (0): either way, spent.
		_, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	return err == nil && (errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK))
}
