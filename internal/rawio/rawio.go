// Package rawio reads and writes the gateway's busiest descriptors (the
// MCP endpoint's client connections on its fast path, the pipes of stdio
// upstreams, and the connections to plain-HTTP upstreams) with raw system
// calls, the runtime's poller still doing the waiting.
//
// Why: package syscall's Read and Write tell the Go scheduler that a
// system call starts and ends, and the first such call after the whole
// process went idle wakes the runtime's sysmon thread from its deep
// sleep. A gateway goes idle twice per call at low load (waiting for the
// upstream, then for the client), so every call woke sysmon, which then
// ran every 20 µs until the process was idle again: each wake a context
// switch on the CPU the gateway shares with its stdio upstreams. A read
// or write of a nonblocking descriptor never blocks, so it needs none of
// what the scheduler does around a system call: made raw, it leaves
// sysmon asleep. Measured in interleaved pairs (issue 10, BENCHMARKS.md):
// about a fifth less of mcpgw's CPU per relayed call over stdio at one
// session, and about a tenth less at 64 sessions.
//
// Under load package syscall's calls cost more than that wake: when a call
// outlasts sysmon's tick and no other P is idle, sysmon hands the call's P
// to another thread. On loopback a write runs the receiver's side and wakes
// it, and on a CPU shared with the upstream the kernel often switches to
// the upstream inside that write. With package net's calls on its
// connections to a lean HTTP upstream on the same CPU, at 64 sessions,
// mcpgw's work moved between four threads with sysmon awake, 0.6 time
// slices per call; raw, on one thread, 0.2, and 16% less CPU per call.
// Beside the demo server, which spends 100-300 µs per call on that CPU, raw
// costs about 15% more instead: the two preempt each other about twice as
// often (the server's involuntary context switches per call 0.5 -> 1.0). An
// HTTP upstream seldom shares the gateway's CPU outside a benchmark
// (internal/h1's newConn).
//
// Only descriptors in nonblocking mode are taken (Conn and File check), so
// a raw call cannot hold a thread. Errors are wrapped as the standard
// library wraps them (net.OpError for a connection, os.PathError for a
// file), so that callers' errors.Is and errors.As checks hold. Deadlines
// and Close work as for the wrapped connection or file: the waiting is its
// poller's.
//
// It is its own package because internal/h1 (the edge's HTTP server and
// the upstreams' client) and the stdio transport (upstream) use it, and a
// leaf under internal/ is what each may import.
package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// FD is one nonblocking descriptor, read and written with raw system
// calls. One Read and one Write may run at a time, concurrently with each
// other (as one reader and one writer of a connection do). Nothing may put
// the descriptor in blocking mode while an FD uses it (os.File's Fd does):
// a raw call that blocks holds its thread and the scheduler's P with it.
type FD struct {
	rc   syscall.RawConn
	wrap func(op string, err error) error

	// Each direction's call in progress, and the functions handed to
	// RawConn (method values made once, so that a call allocates none).
	r      ioState
	w      ioState
	readFn func(fd uintptr) bool
	peekFn func(fd uintptr) bool // Idle's
	peeked byte                  // Idle's buffer, under Read's turn
	allFn  func(fd uintptr) bool // Write's
	onceFn func(fd uintptr) bool // TryWrite's
	vecFn  func(fd uintptr) bool // Writev's
	iov    [2]iovec              // Writev's, under Write's turn
}

// ioState is one direction's call in progress: what RawConn's function
// reads or writes, and what it got.
type ioState struct {
	p   []byte
	q   []byte // Writev's second buffer
	n   int
	err syscall.Errno
	eof bool
	// stuck: a write took nothing and said nothing (it cannot happen on a
	// pipe or a socket); Write then fails as package os's does, with
	// io.ErrUnexpectedEOF, rather than trying again for ever.
	stuck bool
}

// Conn returns an FD for c's descriptor, or nil when c has none in
// nonblocking mode (a TLS connection, a net.Pipe, another platform).
func Conn(c net.Conn) *FD {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	return open(sc, func(op string, err error) error {
		return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, err)}
	})
}

// File returns an FD for f's descriptor (a pipe's end), or nil when it is
// not in nonblocking mode.
func File(f *os.File) *FD {
	return open(f, func(op string, err error) error {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	})
}

func open(sc syscall.Conn, wrap func(string, error) error) *FD {
	if !supported {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) { nonblocking = isNonblocking(fd) }); err != nil || !nonblocking {
		return nil
	}
	f := &FD{rc: rc, wrap: wrap}
	f.readFn, f.allFn, f.onceFn, f.vecFn = f.readOnce, f.writeAll, f.writeOnce, f.writevAll
	f.peekFn = f.peekOnce
	return f
}

// Read reads into p as the connection's or file's Read does: at least one
// byte, or io.EOF at the end, or the error.
func (f *FD) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	f.r = ioState{p: p}
	err := f.rc.Read(f.readFn)
	s := f.r
	f.r = ioState{}
	switch {
	case err != nil:
		return 0, f.pollErr(err)
	case s.err != 0:
		return 0, f.wrap("read", s.err)
	case s.eof:
		return 0, io.EOF
	}
	raceAfterRead(p[:s.n])
	return s.n, nil
}

// readOnce is RawConn.Read's function: one read, again on EINTR; false
// (wait for the poller) when there is nothing to read yet.
func (f *FD) readOnce(fd uintptr) bool {
	for {
		n, errno := read(fd, f.r.p)
		switch errno {
		case 0:
			f.r.n, f.r.eof = n, n == 0
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		f.r.err = errno
		return true
	}
}

// Idle reports whether a connection has nothing to read and has not
// ended, with one peek that takes nothing and does not wait: the look a
// pool takes at an idle connection before it carries a request again (a
// server that closed it, or sent something unasked, makes it unfit). It
// is false on any error, and for a descriptor that is not a socket. It
// takes Read's turn: not while a Read runs.
func (f *FD) Idle() bool {
	f.r = ioState{}
	err := f.rc.Read(f.peekFn)
	s := f.r
	f.r = ioState{}
	return err == nil && s.err == syscall.EAGAIN
}

// peekOnce is Idle's function for RawConn.Read: one peek, again on EINTR,
// done whatever it gave.
func (f *FD) peekOnce(fd uintptr) bool {
	for {
		n, errno := peek(fd, &f.peeked)
		if errno != syscall.EINTR {
			f.r.n, f.r.err = n, errno
			return true
		}
	}
}

// Write writes all of p as the connection's or file's Write does, waiting
// for room when the descriptor is full.
func (f *FD) Write(p []byte) (int, error) {
	s, err := f.runWrite(f.allFn, p, nil)
	return s.n, f.writeErr("write", s, err)
}

// Writev writes all of a and then all of b, in one system call when the
// descriptor has room for both (a header and a large body go out so,
// neither copied into the other). It returns the bytes written of both.
func (f *FD) Writev(a, b []byte) (int, error) {
	s, err := f.runWrite(f.vecFn, a, b)
	return s.n, f.writeErr("writev", s, err)
}

// TryWrite makes one write of p without waiting for room: it returns how
// much the descriptor took, 0 when it is full.
func (f *FD) TryWrite(p []byte) (int, error) {
	s, err := f.runWrite(f.onceFn, p, nil)
	if err == nil && s.err == syscall.EAGAIN {
		return 0, nil
	}
	if err := f.writeErr("write", s, err); err != nil {
		return 0, err
	}
	return s.n, nil
}

// runWrite runs fn, one of the write functions, through RawConn.Write on
// a and b, and returns what it did, or the poller's error.
func (f *FD) runWrite(fn func(uintptr) bool, a, b []byte) (ioState, error) {
	raceBeforeWrite(a)
	raceBeforeWrite(b)
	f.w = ioState{p: a, q: b}
	err := f.rc.Write(fn)
	s := f.w
	f.w, f.iov = ioState{}, [2]iovec{}
	if err != nil {
		return s, f.pollErr(err)
	}
	return s, nil
}

// writeErr is the error of a write that ended as s, after err from the
// poller.
func (f *FD) writeErr(op string, s ioState, err error) error {
	switch {
	case err != nil:
		return err
	case s.err != 0:
		return f.wrap(op, s.err)
	case s.stuck:
		return io.ErrUnexpectedEOF
	}
	return nil
}

// writeAll is Write's function for RawConn.Write: writes until p is all
// written (true), the descriptor is full (false: wait for room) or an
// error.
func (f *FD) writeAll(fd uintptr) bool {
	for f.w.n < len(f.w.p) {
		if ret, done := f.took(write(fd, f.w.p[f.w.n:])); done {
			return ret
		}
	}
	return true
}

// writevAll is Writev's function for RawConn.Write, as writeAll is
// Write's.
func (f *FD) writevAll(fd uintptr) bool {
	for {
		a, b := f.w.p, f.w.q
		if k := min(f.w.n, len(a)); k > 0 {
			a = a[k:]
		}
		if k := f.w.n - len(f.w.p); k > 0 {
			b = b[k:]
		}
		var n int
		var errno syscall.Errno
		switch {
		case len(a) == 0 && len(b) == 0:
			return true
		case len(b) == 0:
			n, errno = write(fd, a)
		case len(a) == 0:
			n, errno = write(fd, b)
		default:
			n, errno = writev(fd, &f.iov, a, b)
		}
		if ret, done := f.took(n, errno); done {
			return ret
		}
	}
}

// took counts one write's outcome in f.w. With done, the write function
// returns ret: true when the write is over (failed, or took nothing), false
// to wait for room; without, it writes on.
func (f *FD) took(n int, errno syscall.Errno) (ret, done bool) {
	switch errno {
	case 0:
		if n == 0 {
			f.w.stuck = true
			return true, true
		}
		f.w.n += n
		return false, false
	case syscall.EINTR:
		return false, false
	case syscall.EAGAIN:
		return false, true
	}
	f.w.err = errno
	return true, true
}

// writeOnce is TryWrite's function for RawConn.Write: one write (again on
// EINTR), done whatever it gave.
func (f *FD) writeOnce(fd uintptr) bool {
	for {
		n, errno := write(fd, f.w.p)
		if errno != syscall.EINTR {
			f.w.n, f.w.err = n, errno
			return true
		}
	}
}

// pollErr is the error the poller's wait gave: the descriptor was closed
// (net.ErrClosed for a connection, os.ErrClosed for a file, as their own
// Read and Write say) or a deadline passed.
func (f *FD) pollErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
		return err
	}
	return os.ErrClosed
}
