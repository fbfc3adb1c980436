package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// handshakeTimeout bounds the stdio server's answer to initialize.
	handshakeTimeout = 30 * time.Second
	// exitTimeout is how long the stdio server has to exit once its stdin
	// is closed before it is killed.
	exitTimeout = 5 * time.Second
)

// runDirect is direct mode: spawn the stdio server, load it with c.sessions
// workers over its one pipe, watch it, and stop it.
func runDirect(ctx context.Context, c *config, stderr io.Writer) (*report, error) {
	srv, err := startStdio(c.command, stderr)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	if err := srv.handshake(ctx); err != nil {
		return nil, err
	}
	w, err := newWatcher(srv.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	calls := srv.startWorkers(c.sessions, c.request, &c.check)
	res := runLoad(ctx, c.plan(), calls, w.start, w.stop)
	if n := srv.stray.Load(); n > 0 {
		res.errors += n
		res.errorSamples = append(res.errorSamples, fmt.Sprintf("%d lines on stdout were not JSON-RPC or answered no pending request", n))
	}
	rep := newLoadReport(modeDirect, strings.Join(c.command, " "), c, res)
	if n := srv.requests.Load(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d server-to-client requests were not answered", n))
	}
	addWatched(rep, res, w)
	return rep, nil
}

// stdioServer is a spawned stdio MCP server and the one connection to it
// (MCP basic/transports, "stdio": newline-delimited JSON-RPC).
//
// Workers write requests to stdin under wmu. One reader goroutine reads
// stdout and hands each response to its worker:
//
//	worker k ── pending = id ─▶ stdin (wmu) ─▶ server ─▶ stdout ─▶ reader
//	       ◀── ready ◀── buf = line ◀── CAS pending id→0, worker (id-1) % n
//
// Worker k of n uses the ids k+1, k+1+n, k+1+2n, ..., so the id names its
// worker without a map. The CAS makes a duplicate or unknown id a stray
// line instead of a write into a buffer the worker is reading.
type stdioServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // the read end of the child's stdout
	lines  *lineReader

	wmu     sync.Mutex // serialises writes to stdin
	workers []*stdioWorker
	done    chan struct{} // closed when the reader ends
	readErr error         // why it ended; read after done

	stray    atomic.Int64 // lines that were no pending response
	requests atomic.Int64 // server-to-client requests, not answered
	closed   sync.Once
}

// stdioWorker is one worker's side of the connection.
type stdioWorker struct {
	pending atomic.Int64  // the id awaited, or 0
	ready   chan struct{} // the reader has put the answer in buf
	buf     []byte        // the answer: written by the reader between the CAS and ready
	req     []byte
	seq     int64
}

// startStdio starts the command with pipes on its stdin and stdout; its
// stderr goes to stderr.
func startStdio(command []string, stderr io.Writer) (*stdioServer, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe rather than StdoutPipe: Wait must not close it under the
	// reader, and close can close it to unblock the reader.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("starting %s: %w", command[0], err)
	}
	pw.Close()
	return &stdioServer{
		cmd:    cmd,
		stdin:  stdin,
		stdout: pr,
		lines:  newLineReader(pr, 64<<10, maxMessage),
		done:   make(chan struct{}),
	}, nil
}

// write sends one line (b ends in '\n').
func (s *stdioServer) write(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.stdin.Write(b)
	return err
}

// handshake sends initialize, waits for its result (skipping anything
// else) within handshakeTimeout, and sends notifications/initialized. It
// runs before the reader goroutine starts.
func (s *stdioServer) handshake(ctx context.Context) error {
	init := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpgw-bench","version":"0.1.0"}}}`+"\n", protocolVersion)
	if err := s.write(init); err != nil {
		return fmt.Errorf("initialize: writing to the server: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.readInitialize() }()
	t := time.NewTimer(handshakeTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-errc:
	case <-t.C:
		err = fmt.Errorf("no answer within %v", handshakeTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.cmd.Process.Kill()
		s.stdout.Close() // ends the read, even if a grandchild holds the pipe
		<-errc
		return fmt.Errorf("initialize: %w", err)
	}
	if err := s.write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		return fmt.Errorf("notifications/initialized: writing to the server: %w", err)
	}
	return nil
}

// readInitialize reads stdout up to the response to initialize (id 0).
func (s *stdioServer) readInitialize() error {
	for {
		line, err := s.lines.next()
		if err != nil {
			return fmt.Errorf("reading the server's stdout: %w", err)
		}
		env, err := parseEnvelope(line)
		if err != nil || !env.isResponse() {
			continue // a log line, a notification, a request
		}
		result, err := responseResult(env, 0)
		if err != nil {
			return err
		}
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if err := json.Unmarshal(result, &r); err != nil || r.ProtocolVersion == "" {
			return errors.New("the result has no protocolVersion")
		}
		return nil
	}
}

// startWorkers makes n workers, starts the reader and returns the workers'
// calls.
func (s *stdioServer) startWorkers(n int, tmpl requestTemplate, chk *checker) []callFunc {
	s.workers = make([]*stdioWorker, n)
	calls := make([]callFunc, n)
	for k := range s.workers {
		w := &stdioWorker{ready: make(chan struct{}, 1)}
		s.workers[k] = w
		calls[k] = s.caller(w, int64(k), tmpl, chk)
	}
	go s.read()
	return calls
}

// read is the reader goroutine: it dispatches stdout lines until EOF or a
// read error, then closes done.
func (s *stdioServer) read() {
	defer close(s.done)
	for {
		line, err := s.lines.next()
		if err != nil {
			s.readErr = err
			return
		}
		if len(line) == 0 {
			continue
		}
		env, err := parseEnvelope(line)
		switch {
		case err != nil:
			s.stray.Add(1)
		case env.method != nil && env.id != nil:
			s.requests.Add(1)
		case env.method != nil: // a notification
		default:
			s.deliver(env.id, line)
		}
	}
}

// deliver hands line, the response with the given id, to its worker.
func (s *stdioServer) deliver(rawID, line []byte) {
	id, ok := parseID(rawID)
	if !ok || id < 1 {
		s.stray.Add(1)
		return
	}
	w := s.workers[(id-1)%int64(len(s.workers))]
	if !w.pending.CompareAndSwap(id, 0) {
		s.stray.Add(1)
		return
	}
	w.buf = append(w.buf[:0], line...)
	w.ready <- struct{}{} // never blocks: one answer per request
}

// caller returns the callFunc of worker k.
func (s *stdioServer) caller(w *stdioWorker, k int64, tmpl requestTemplate, chk *checker) callFunc {
	n := int64(len(s.workers))
	return func(ctx context.Context) (time.Duration, int, error) {
		id := w.seq*n + k + 1
		w.seq++
		w.req = append(tmpl.build(w.req[:0], id), '\n')
		w.pending.Store(id)
		start := time.Now()
		if err := s.write(w.req); err != nil {
			w.pending.Store(0)
			return 0, 0, fmt.Errorf("%w: writing to its stdin: %v", errStopped, err)
		}
		if err := s.wait(ctx, w, id); err != nil {
			return 0, 0, err
		}
		env, err := parseEnvelope(w.buf)
		if err != nil {
			return 0, 0, err
		}
		return chk.measure(env, id, start)
	}
}

// wait waits for the answer to id. If the reader or ctx ends first and
// the answer was not delivered meanwhile, it takes the id back and fails.
func (s *stdioServer) wait(ctx context.Context, w *stdioWorker, id int64) error {
	var err error
	select {
	case <-w.ready:
		return nil
	case <-s.done:
		err = fmt.Errorf("%w: reading its stdout: %v", errStopped, s.readErr)
	case <-ctx.Done():
		err = fmt.Errorf("no answer: %w", ctx.Err())
	}
	if w.pending.CompareAndSwap(id, 0) {
		return err
	}
	<-w.ready // delivered after all: the reader has sent, or is sending
	return nil
}

// close closes the server's stdin, waits exitTimeout for it to exit, then
// kills it; and stops the reader. It is idempotent.
func (s *stdioServer) close() {
	s.closed.Do(func() {
		s.stdin.Close()
		exited := make(chan struct{})
		go func() {
			s.cmd.Wait() // its exit status is not the benchmark's business
			close(exited)
		}()
		t := time.NewTimer(exitTimeout)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			s.cmd.Process.Kill()
			<-exited
		}
		s.stdout.Close() // a grandchild may still hold the pipe open
		if s.workers != nil {
			<-s.done
		}
	})
}
