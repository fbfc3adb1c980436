package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Limits of what the stdio transport keeps of a child's output.
const (
	stderrLineMax = 4 << 10 // a longer stderr line is logged cut
	lastStderrMax = 1 << 10 // what lastStderr keeps of the last line
	loggedLineMax = 256     // what the debug log shows of a dropped stdout line
)

// killReapBound is how long close waits, once its context ended and the
// group was sent SIGKILL, for the process to be reaped.
const killReapBound = 2 * time.Second

// inheritedEnv are the only variables of the gateway's environment a child
// gets (DESIGN decision 9).
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// stdioTransport runs a server as a child process and speaks newline-delimited
// JSON-RPC on its stdin and stdout (MCP 2025-11-25, basic/transports#stdio).
//
// # Life of the child
//
//	start ──► spawn (own process group, minimal env, pipes for 0, 1, 2)
//	            │
//	            ├─ waiter:     cmd.Wait, then closes exited
//	            ├─ stdout:     lineReader (cap MaxMessageBytes) ─► jsonrpc.Parse ─► recv
//	            ├─ stderr:     lineReader (cap 4 KiB) ─► debug log, OnLog("stderr"), last line
//	            └─ supervisor: waits for exited or a stop request, then
//	                 stop:  close stdin ─grace─► SIGTERM group ─grace─► SIGKILL group
//	                 end:   SIGKILL the group's leftovers, drain the readers,
//	                        close the pipes, record why, close done
//
// A stop is requested by close (a clean end: err is nil), by a message over
// the cap (err says so), or by stdout closing (the process is then expected
// to exit within the grace). A process that exits by itself ends the
// transport with an error naming its exit status and last stderr line.
//
// The child's life is owned by the transport, not by the context given to
// start: the process outlives the Connect call that spawned it.
type stdioTransport struct {
	name    string
	command string
	args    []string
	env     map[string]string
	dir     string
	maxMsg  int64
	grace   time.Duration
	logger  *slog.Logger
	onLog   func(tag, text string) // ClientOptions.OnLog; may be nil
	redact  *strings.Replacer      // the env's values, out of what stderr shows; nil if none

	mu            sync.Mutex
	started       bool
	closed        bool  // close was called
	stopRequested bool  // stopCh is closed
	stopByClose   bool  // the stop was asked by close
	stopReason    error // why a stop not asked by close was requested
	stopFatal     bool  // stopReason wins over the exit status
	waitErr       error // cmd.Wait's result, once exited is closed
	exitedFirst   bool  // the process exited before any stop request
	finished      bool  // no goroutine may be added to wg any more
	doneErr       error
	lastLine      string // last stderr line, at most lastStderrMax bytes

	cmd     *exec.Cmd
	pgid    int
	pidv    atomic.Int64
	stdin   *os.File // our end of the child's stdin
	stdout  *os.File // our end of the child's stdout
	stderr  *os.File // our end of the child's stderr
	inOnce  sync.Once
	signals atomic.Bool // we signalled the group

	// wmu serializes writes to stdin. It is a channel so that a sender
	// waiting behind a writer blocked on a full pipe can give up when its
	// context ends.
	wmu chan struct{}
	// queue holds the lines sent and not yet taken by a writer; the
	// sender that gets wmu writes the queued lines (up to maxPooledLine
	// bytes) in one write, so that under load one syscall (and one wakeup
	// of the child) carries many messages. Under qmu.
	qmu   sync.Mutex
	queue []*queuedLine

	stopCh     chan struct{} // closed to begin the stop sequence
	killCh     chan struct{} // closed when close's ctx ended: skip the grace periods
	killOnce   sync.Once
	exited     chan struct{} // closed once the process is reaped
	stdoutDone chan struct{}
	stderrDone chan struct{}
	doneCh     chan struct{}
	doneOnce   sync.Once
	wg         sync.WaitGroup // every goroutine the transport starts
}

var (
	_ transport   = (*stdioTransport)(nil)
	_ processInfo = (*stdioTransport)(nil)
)

// errStdoutClosed ends a transport whose child closed its stdout but would
// not exit.
var errStdoutClosed = errors.New("server closed its stdout")

func newStdioTransport(srv config.Server, opts *ClientOptions) transport {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxMsg := opts.MaxMessageBytes
	if maxMsg <= 0 {
		maxMsg = config.DefaultMaxResponseBody
	}
	grace := opts.StopGrace
	if grace <= 0 {
		grace = defaultStopGrace
	}
	return &stdioTransport{
		name:       opts.Name,
		command:    srv.Command,
		args:       slices.Clone(srv.Args),
		env:        maps.Clone(srv.Env),
		dir:        srv.Cwd,
		maxMsg:     maxMsg,
		grace:      grace,
		logger:     logger,
		onLog:      opts.OnLog,
		redact:     envRedactor(srv.Env),
		wmu:        make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		killCh:     make(chan struct{}),
		exited:     make(chan struct{}),
		stdoutDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
		doneCh:     make(chan struct{}),
	}
}

// envRedactor replaces the values of env (a server's credentials, often)
// that are long enough not to be ordinary words, so that a child echoing
// them on stderr does not put them in logs. It returns nil when there are
// none.
func envRedactor(env map[string]string) *strings.Replacer {
	var values []string
	for _, v := range env {
		if len(v) >= 8 {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return nil
	}
	// Longest first, so that a value containing another goes whole.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		pairs = append(pairs, v, "[redacted]")
	}
	return strings.NewReplacer(pairs...)
}

// childEnv is the child's whole environment: PATH, HOME, TMPDIR and LANG
// from ours when set, then the server's configured env, which wins. Nothing
// else of the gateway's environment (which holds its secrets) is passed on
// (DESIGN decision 9).
func childEnv(configured map[string]string) []string {
	env := make(map[string]string, 4+len(configured))
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, configured)
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func (t *stdioTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return &ConnectionError{Server: t.name}
	}
	if t.started {
		return errors.New("stdio transport started twice")
	}
	t.started = true

	// exec.Command resolves the command through PATH. The context is not
	// the child's: exec.CommandContext would kill it when Connect returns.
	cmd := exec.Command(t.command, t.args...)
	cmd.Env = childEnv(t.env)
	cmd.Dir = t.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Our own pipes rather than cmd.StdinPipe and friends: they are
	// *os.File, so exec starts no copying goroutines and Wait does not
	// wait for a grandchild that keeps them open, and our ends take
	// deadlines.
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err := pipe()
	if err != nil {
		return t.failStart(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return t.failStart(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return t.failStart(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return t.failStart(err)
	}
	// The child has its copies; ours would keep the pipes open.
	inR.Close()
	outW.Close()
	errW.Close()

	t.cmd = cmd
	t.pgid = cmd.Process.Pid // Setpgid with Pgid 0: the group is named after the child
	t.pidv.Store(int64(cmd.Process.Pid))
	t.stdin, t.stdout, t.stderr = inW, outR, errR
	t.logger.Debug("server process started", "pid", cmd.Process.Pid)

	t.wg.Add(4)
	go t.wait()
	go t.readStdout(recv)
	go t.readStderr()
	go t.supervise()
	return nil
}

// failStart ends a transport whose process could not be started. t.mu is
// held.
func (t *stdioTransport) failStart(err error) error {
	err = fmt.Errorf("starting server %q: %w", t.name, err)
	t.finished = true
	t.doneErr = err
	t.doneOnce.Do(func() { close(t.doneCh) })
	return err
}

// wait reaps the process.
func (t *stdioTransport) wait() {
	defer t.wg.Done()
	err := t.cmd.Wait()
	t.mu.Lock()
	t.waitErr = err
	t.exitedFirst = !t.stopRequested
	t.mu.Unlock()
	close(t.exited)
}

// readStdout passes every JSON-RPC message on the child's stdout to recv.
func (t *stdioTransport) readStdout(recv func(m *jsonrpc.Message, rel related)) {
	defer t.wg.Done()
	defer close(t.stdoutDone)
	lr := newLineReader(t.stdout, t.maxMsg)
	for {
		line, err := lr.readLine()
		switch {
		case errors.Is(err, errLineTooLong):
			t.requestStop(fmt.Errorf("server %q sent a message larger than %d bytes", t.name, t.maxMsg), true)
			return
		case err != nil:
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				t.logger.Debug("reading stdout failed", "err", err)
			}
			t.requestStop(errStdoutClosed, false)
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		// A JSON array is a batch, which 2025-03-26 servers may send. The
		// messages are parsed in a copy: lr reuses its buffer.
		msgs, _, err := jsonrpc.Parse(line)
		if err != nil {
			t.logger.Debug("dropping a stdout line that is not JSON-RPC", "err", err, "line", truncate(line, loggedLineMax))
			continue
		}
		for _, m := range msgs {
			recv(m, related{}) // stdio attributes nothing to a request
		}
	}
}

// readStderr logs the child's stderr line by line, passes each line to
// onLog, and keeps the last line, each without the values of the env.
func (t *stdioTransport) readStderr() {
	defer t.wg.Done()
	defer close(t.stderrDone)
	lr := newLineReader(t.stderr, stderrLineMax)
	for {
		line, err := lr.readLine()
		cut := errors.Is(err, errLineTooLong)
		if err != nil && !cut {
			return
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(line) == 0 {
			continue
		}
		s := strings.ToValidUTF8(string(line), "\uFFFD")
		if t.redact != nil {
			s = t.redact.Replace(s)
		}
		if cut {
			t.logger.Debug("server stderr", "line", s, "truncated", true)
		} else {
			t.logger.Debug("server stderr", "line", s)
		}
		if t.onLog != nil {
			if cut {
				t.onLog(TagStderr, s+" …")
			} else {
				t.onLog(TagStderr, s)
			}
		}
		t.mu.Lock()
		t.lastLine = truncate([]byte(s), lastStderrMax)
		t.mu.Unlock()
	}
}

// requestStop begins the stop sequence once. A fatal reason is reported as
// the transport's error whatever the exit status; a non-fatal one only if
// the process had to be signalled.
func (t *stdioTransport) requestStop(reason error, fatal bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopRequested {
		return
	}
	t.stopRequested = true
	if reason == nil {
		t.stopByClose = true
	} else {
		t.stopReason = reason
		t.stopFatal = fatal
	}
	close(t.stopCh)
}

// supervise stops the process when asked, then cleans up after it however
// it ended, and closes done.
func (t *stdioTransport) supervise() {
	defer t.wg.Done()
	select {
	case <-t.exited:
	case <-t.stopCh:
		t.stop()
	}
	// The leader is reaped; kill what is left of its group (the children
	// of a "sh -c" wrapper). The kernel does not reuse a group's id while
	// any member lives, so this reaches our leftovers; with none left, the
	// id could only name another group if a new process took the freed pid
	// and made itself a group leader in the instant since the reap.
	if err := syscall.Kill(-t.pgid, syscall.SIGKILL); err == nil {
		t.logger.Debug("killed leftover processes of the server's group")
	}
	t.closeStdin()
	t.drain()

	err := t.endError()
	t.mu.Lock()
	t.finished = true
	t.doneErr = err
	t.mu.Unlock()
	t.logger.Debug("server process ended", "pid", t.pid())
	t.doneOnce.Do(func() { close(t.doneCh) })
}

// stop escalates until the process exits: EOF on stdin, then SIGTERM to the
// group, then SIGKILL, each after the grace period (or at once when close's
// context ended).
func (t *stdioTransport) stop() {
	t.closeStdin()
	if t.waitExit() {
		return
	}
	t.signal(syscall.SIGTERM)
	if t.waitExit() {
		return
	}
	t.signal(syscall.SIGKILL)
	<-t.exited
}

// waitExit waits up to the grace period for the process to exit. It
// reports false at once if close's context ended.
func (t *stdioTransport) waitExit() bool {
	timer := time.NewTimer(t.grace)
	defer timer.Stop()
	select {
	case <-t.exited:
		return true
	case <-t.killCh:
		return false
	case <-timer.C:
		return false
	}
}

// signal sends sig to the child's whole process group while the leader is
// not yet reaped (so its id still names our group).
func (t *stdioTransport) signal(sig syscall.Signal) {
	select {
	case <-t.exited:
		return
	default:
	}
	t.signals.Store(true)
	t.logger.Debug("signalling the server's process group", "signal", sig.String())
	if err := syscall.Kill(-t.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.logger.Warn("signalling the server's process group failed", "signal", sig.String(), "err", err)
	}
}

func (t *stdioTransport) closeStdin() {
	t.inOnce.Do(func() { t.stdin.Close() })
}

// drain lets the readers finish what the process wrote before it exited. A
// process that escaped the group (setsid) may hold the pipes open: after the
// grace period, or at once if close's context ended, the reads are cut.
func (t *stdioTransport) drain() {
	timer := time.NewTimer(t.grace)
	defer timer.Stop()
	wait := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-t.killCh:
		case <-timer.C:
		}
		return false
	}
	if !wait(t.stdoutDone) || !wait(t.stderrDone) {
		t.cutReads()
	}
	<-t.stdoutDone
	<-t.stderrDone
	t.stdout.Close()
	t.stderr.Close()
}

func (t *stdioTransport) cutReads() {
	past := time.Unix(1, 0)
	for _, f := range []*os.File{t.stdout, t.stderr} {
		if f.SetReadDeadline(past) != nil {
			f.Close() // not pollable: closing is the best we can do
		}
	}
}

// endError says why the transport ended: nil after close, the fatal reason
// (a message over the cap), or how the process exited.
func (t *stdioTransport) endError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	exit := &exitError{err: t.waitErr, stderr: t.lastLine}
	switch {
	case t.exitedFirst:
		return exit
	case t.stopByClose:
		return nil
	case t.stopFatal:
		return t.stopReason
	case t.signals.Load():
		return t.stopReason
	default:
		return exit
	}
}

// exitError reports a process that exited by itself.
type exitError struct {
	err    error // from exec.Cmd.Wait: nil for status 0
	stderr string
}

func (e *exitError) Error() string {
	status := "exit status 0"
	if e.err != nil {
		status = e.err.Error()
	}
	if e.stderr == "" {
		return "process exited: " + status
	}
	return fmt.Sprintf("process exited: %s (last stderr: %q)", status, e.stderr)
}

func (e *exitError) Unwrap() error { return e.err }

// send writes m as one line. It fails at once when the process is gone or
// stopping, and gives up when ctx ends while the pipe is full.
func (t *stdioTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	bp := lineBuffers.Get().(*[]byte)
	// Encode's output has no newline (it compacts a message that has one:
	// in valid JSON a newline can only be whitespace), so the line is one
	// message.
	b, err := jsonrpc.AppendEncode((*bp)[:0], m)
	if err != nil {
		lineBuffers.Put(bp)
		return fmt.Errorf("encoding message: %w", err)
	}
	b = append(b, '\n')
	// The buffer, and the queued line once there is one, go back to
	// their pools once nothing can write from them: after the outcome
	// came, or the line was taken off the queue unsent.
	reuse := true
	defer func() {
		if reuse && cap(b) <= maxPooledLine {
			*bp = b
			lineBuffers.Put(bp)
		}
	}()

	t.mu.Lock()
	started := t.started
	t.mu.Unlock()
	if !started {
		return &ConnectionError{Server: t.name, Err: errors.New("not started")}
	}
	if err := t.usable(); err != nil {
		return err
	}
	q := queuedLines.Get().(*queuedLine)
	q.b = b
	defer func() {
		if reuse {
			q.release()
		}
	}()
	t.qmu.Lock()
	t.queue = append(t.queue, q)
	t.qmu.Unlock()
	// Most often no one is writing: this sender writes, and its outcome
	// is in once it has, without the select below (which locks its five
	// channels each time). That select could have chosen the same.
	select {
	case t.wmu <- struct{}{}:
		t.flush(ctx)
		select {
		case err := <-q.done:
			return err
		default: // left queued behind a full write: as below
		}
	default:
	}
	for {
		select {
		case err := <-q.done:
			return err
		case t.wmu <- struct{}{}:
			t.flush(ctx)
			continue
		case <-ctx.Done():
			// Else a writer may be writing it now, and will send its
			// outcome: neither the line nor q can be reused.
			reuse = t.dequeue(q)
			return ctx.Err()
		case <-t.stopCh:
		case <-t.exited:
		}
		if t.dequeue(q) {
			return t.connErr()
		}
		return <-q.done // a writer has it; its outcome comes
	}
}

// lineBuffers are the buffers messages to stdio servers are encoded in,
// reused once written; maxPooledLine bounds the ones kept.
var lineBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledLine = 256 << 10

// queuedLine is one message waiting to be written to stdin, and how its
// sender learns the outcome.
type queuedLine struct {
	b    []byte
	done chan error // buffered 1
}

// queuedLines are the queuedLines of sends that are over, with their
// channels empty, for the next sends: the stdio transport alone holds
// them. A writer hands a line its outcome last: once its sender has the
// outcome, or took the line off the queue unsent, no one else holds it.
var queuedLines = sync.Pool{New: func() any { return &queuedLine{done: make(chan error, 1)} }}

// release gives q back to queuedLines, for a sender that has its outcome
// or took it off the queue.
func (q *queuedLine) release() {
	q.b = nil
	queuedLines.Put(q)
}

// dequeue takes q out of the queue, reporting whether it was still there
// (no writer took it).
func (t *stdioTransport) dequeue(q *queuedLine) bool {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	for i, l := range t.queue {
		if l == q {
			t.queue = slices.Delete(t.queue, i, i+1)
			return true
		}
	}
	return false
}

// flush writes the queued lines in one write, for a sender that holds
// wmu, and releases wmu. Each line's sender gets the outcome. When ctx
// (the writing sender's) ends in the middle, the rest is written in the
// background, holding wmu, so that the next message starts on a line of
// its own and the other senders' lines still go; closing stdin unblocks it.
func (t *stdioTransport) flush(ctx context.Context) {
	t.qmu.Lock()
	lines := t.queue
	if len(lines) == 0 {
		t.qmu.Unlock()
		<-t.wmu
		return
	}
	// At most maxPooledLine bytes in one write (a line larger than that
	// alone), so that the joined lines' buffer goes back to the pool; the
	// rest stay queued for the next writer, who is one of their senders.
	take, size := 1, len(lines[0].b)
	for take < len(lines) && size+len(lines[take].b) <= maxPooledLine {
		size += len(lines[take].b)
		take++
	}
	t.queue = nil
	if take < len(lines) {
		t.queue = slices.Clone(lines[take:])
	}
	lines = lines[:take]
	t.qmu.Unlock()
	// Checked again: the lock may have been won after the end.
	if err := t.usable(); err != nil {
		for _, l := range lines {
			l.done <- err
		}
		<-t.wmu
		return
	}
	var buf []byte
	if len(lines) == 1 {
		buf = lines[0].b // one line: written from its own buffer
	} else {
		// Several lines are joined in a buffer of the line pool (the
		// rest of a cut write is copied out of it below).
		bp := lineBuffers.Get().(*[]byte)
		buf = (*bp)[:0]
		for _, l := range lines {
			buf = append(buf, l.b...)
		}
		defer func() {
			if cap(buf) <= maxPooledLine {
				*bp = buf
				lineBuffers.Put(bp)
			}
		}()
	}
	n, err := t.write(ctx, buf)
	if err == nil {
		for _, l := range lines {
			l.done <- nil
		}
		<-t.wmu
		return
	}
	if ctx.Err() != nil && t.track() {
		rest := bytes.Clone(buf[n:])
		// The lines written whole get their outcome now, and the others
		// once the rest is: lines is cut to those before any outcome is
		// sent, since a line's sender may reuse it once it has its own.
		written, whole := 0, 0
		for _, l := range lines {
			if written += len(l.b); written > n {
				break
			}
			whole++
		}
		left := lines[whole:]
		for _, l := range lines[:whole] {
			l.done <- nil
		}
		go func() {
			defer t.wg.Done()
			_, err := t.stdin.Write(rest)
			if err != nil {
				err = t.writeErr(err)
			}
			for _, l := range left {
				l.done <- err
			}
			<-t.wmu
		}()
		return
	}
	err = t.writeErr(err)
	for _, l := range lines {
		l.done <- err
	}
	<-t.wmu
}

// writeErr is the error a sender gets for a failed write to stdin.
func (t *stdioTransport) writeErr(err error) error {
	if uerr := t.usable(); uerr != nil {
		return uerr
	}
	return &ConnectionError{Server: t.name, Err: fmt.Errorf("writing to stdin: %w", err)}
}

// write writes b to stdin, cutting the write short when ctx ends. It is
// called under wmu.
func (t *stdioTransport) write(ctx context.Context, b []byte) (int, error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		t.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, err := t.stdin.Write(b)
	if !stop() {
		<-fired
		t.stdin.SetWriteDeadline(time.Time{})
	}
	return n, err
}

// track adds a goroutine to wg unless the transport has finished.
func (t *stdioTransport) track() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return false
	}
	t.wg.Add(1)
	return true
}

// usable returns an error when no more messages may be sent.
func (t *stdioTransport) usable() error {
	// Three looks, not one select of three: a look at an open, empty
	// channel takes no lock, where a select locks every channel it names,
	// and every send looks twice.
	if isClosed(t.stopCh) || isClosed(t.exited) || isClosed(t.doneCh) {
		return t.connErr()
	}
	return nil
}

// isClosed reports whether ch, which is only ever closed, is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// connErr is the error of a send on a transport that has ended or is
// ending: a *ConnectionError, so that callers see the server is gone.
func (t *stdioTransport) connErr() error {
	select {
	case <-t.doneCh:
		return &ConnectionError{Server: t.name, Err: t.err()}
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var cause error
	switch {
	case t.stopByClose:
	case t.stopReason != nil && t.stopFatal:
		cause = t.stopReason
	default:
		cause = errors.New("server process is exiting")
	}
	return &ConnectionError{Server: t.name, Err: cause}
}

// ready does nothing: stdio has no per-version behaviour.
func (t *stdioTransport) negotiated(string)     {}
func (t *stdioTransport) ready(context.Context) {}

// close stops the process (see stop) and waits for it and every goroutine
// of the transport. When ctx ends first, the group is killed at once.
func (t *stdioTransport) close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	started := t.started
	if !started {
		t.finished = true
	}
	t.mu.Unlock()
	if !started {
		t.doneOnce.Do(func() { close(t.doneCh) })
		return nil
	}
	t.requestStop(nil, false)
	select {
	case <-t.doneCh:
	case <-ctx.Done():
		t.killOnce.Do(func() { close(t.killCh) })
		timer := time.NewTimer(killReapBound)
		defer timer.Stop()
		select {
		case <-t.doneCh:
		case <-timer.C:
			// A process in uninterruptible sleep: the waiter reaps it
			// when it finally dies.
			return fmt.Errorf("stopping server %q: process %d did not exit after SIGKILL: %w", t.name, t.pid(), ctx.Err())
		}
	}
	t.wg.Wait()
	return nil
}

func (t *stdioTransport) done() <-chan struct{} { return t.doneCh }

func (t *stdioTransport) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneErr
}

func (t *stdioTransport) pid() int { return int(t.pidv.Load()) }

func (t *stdioTransport) lastStderr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastLine
}

// truncate returns b as a string of at most n bytes, cut on a rune
// boundary, with "…" when cut.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	i := n
	for i > 0 && i > n-4 && !utf8.RuneStart(b[i]) {
		i--
	}
	return string(b[:i]) + "…"
}
