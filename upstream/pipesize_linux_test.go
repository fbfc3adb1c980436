package upstream

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestStdioTransport_PipeSize checks that the pipes to and from a stdio
// server get pipeBufferSize buffers where the kernel allows it.
func TestStdioTransport_PipeSize(t *testing.T) {
	tr := newTestStdio(t, "")
	if err := tr.start(context.Background(), func(*jsonrpc.Message, related) {}); err != nil {
		t.Fatal(err)
	}
	defer tr.close(context.Background())
	size := func(f *os.File) int {
		rc, err := f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n uintptr
		rc.Control(func(fd uintptr) { n, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, 1032 /* F_GETPIPE_SZ */, 0) })
		return int(n)
	}
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if max, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && max < pipeBufferSize {
			t.Skipf("fs.pipe-max-size is %d, below %d", max, pipeBufferSize)
		}
	}
	if in, out := size(tr.stdin), size(tr.stdout); in != pipeBufferSize || out != pipeBufferSize {
		t.Errorf("pipe buffers: stdin %d, stdout %d; want %d", in, out, pipeBufferSize)
	}
}
