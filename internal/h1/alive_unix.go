//go:build unix

package h1

import (
	"errors"
	"syscall"
)

// peeker looks at an idle connection without blocking. A connection makes
// one, the first time it is taken from the pool, so that each later look
// allocates nothing.
type peeker struct {
	rc  syscall.RawConn
	err error // the last look's
	buf [1]byte
	fn  func(fd uintptr) bool
}

// alive reports whether an idle connection can carry a request: the server
// has neither closed it nor sent anything on it (an idle connection has
// nothing to read; its buffer was empty when it went idle). It peeks
// without blocking, one system call, so that a server's idle timeout does
// not fail the next request.
func (c *conn) alive() bool {
	p := c.peek
	if p == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		p = &peeker{rc: rc}
		p.fn = func(fd uintptr) bool {
			// No error is a byte or the end (0): either way, spent.
			_, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		}
		c.peek = p
	}
	p.err = nil
	err := p.rc.Read(p.fn)
	return err == nil && (errors.Is(p.err, syscall.EAGAIN) || errors.Is(p.err, syscall.EWOULDBLOCK))
}
