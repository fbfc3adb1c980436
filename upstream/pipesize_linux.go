package upstream

import (
	"os"
	"syscall"
)

// fSetPipeSize is F_SETPIPE_SZ (fcntl(2)), which package syscall lacks.
const fSetPipeSize = 1031

// pipeBufferSize is the buffer asked for the pipes to and from a stdio
// server. Linux gives a pipe 64 KiB: a larger message went through in
// pieces, each a wakeup of the other side, and a 64 KiB result with its
// envelope is just larger. 256 KiB takes such messages in one write and
// stays well within the per-user total of pipe buffers
// (fs.pipe-user-pages-soft, 64 MiB by default) with dozens of servers.
const pipeBufferSize = 256 << 10

// growPipe asks for a pipeBufferSize buffer for the pipe f is an end of.
// The kernel may refuse (fs.pipe-max-size, the per-user total); the pipe
// then keeps its default, which works, only slower.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, pipeBufferSize)
	})
}
