package upstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// defaultLogRotateBytes is the size at which a server's log file is rotated
// to <name>.log.1.
const defaultLogRotateBytes = 5 << 20

// logTimeFormat is the timestamp of a server log line: UTC, milliseconds.
const logTimeFormat = "2006-01-02T15:04:05.000Z"

// serverLog is one server's log file, <dir>/<name>.log: what the server
// writes to stderr, the log messages it sends, and its lifecycle as the
// gateway sees it, one line per record:
//
//	2026-07-03T12:34:56.789Z [stderr]     listening on stdio
//	2026-07-03T12:34:56.790Z [lifecycle]  initialized (protocol 2025-11-25)
//	2026-07-03T12:34:57.001Z [warning]    db: {"slow":true}
//
// When a line would take the file past max bytes, the file becomes
// <name>.log.1 (replacing the previous one) and a new file starts. The
// file is opened at the first line and closed by close. Writes are
// serialized. A failure to open or write is reported to onError once, not
// again until the file has been opened anew; the line is lost.
type serverLog struct {
	path    string
	max     int64
	onError func(error)

	mu     sync.Mutex
	f      *os.File
	size   int64
	closed bool
	failed bool
}

// newServerLog returns the log of server name in dir, or nil when dir is ""
// (no log files). Nothing is created until the first line.
func newServerLog(dir, name string, max int64, onError func(error)) *serverLog {
	if dir == "" {
		return nil
	}
	if max <= 0 {
		max = defaultLogRotateBytes
	}
	return &serverLog{path: filepath.Join(dir, logFileName(name)), max: max, onError: onError}
}

// logFileName is name with every byte outside [A-Za-z0-9._-] replaced by
// "_", plus ".log". A name of dots only cannot climb out of the directory.
func logFileName(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			b[i] = '_'
		}
	}
	s := string(b)
	if strings.Trim(s, ".") == "" {
		s = strings.Repeat("_", max(len(s), 1))
	}
	return s + ".log"
}

// lineBreaks keeps a record on one line.
var lineBreaks = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\r`)

// formatLogLine is one line of a server log, with its newline.
func formatLogLine(now time.Time, tag, text string) string {
	return fmt.Sprintf("%s %-12s %s\n", now.UTC().Format(logTimeFormat), "["+tag+"]", lineBreaks.Replace(text))
}

// write appends one record. It does nothing on a nil log or after close.
func (l *serverLog) write(tag, text string) {
	if l == nil {
		return
	}
	line := formatLogLine(time.Now(), tag, text)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.f == nil || (l.size > 0 && l.size+int64(len(line)) > l.max) {
		if err := l.open(l.f != nil); err != nil {
			l.fail(err)
			return
		}
	}
	n, err := l.f.WriteString(line)
	l.size += int64(n)
	if err != nil {
		l.fail(err)
	}
}

// open opens the file for appending, first moving the current one to .1
// when rotate is set. l.mu is held.
func (l *serverLog) open(rotate bool) error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o750); err != nil {
		return err
	}
	if rotate {
		if err := os.Rename(l.path, l.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size, l.failed = f, st.Size(), false
	return nil
}

// fail reports the first of a run of write errors. l.mu is held.
func (l *serverLog) fail(err error) {
	if !l.failed && l.onError != nil {
		l.onError(err)
	}
	l.failed = true
}

// close closes the file; later writes are dropped. It is idempotent.
func (l *serverLog) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
