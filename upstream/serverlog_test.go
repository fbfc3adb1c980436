package upstream

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLogFileName(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{name: "files", want: "files.log"},
		{name: "My_Server-2.v1", want: "My_Server-2.v1.log"},
		{name: "../../etc/passwd", want: ".._.._etc_passwd.log"},
		{name: "a b/c\x00é", want: "a_b_c___.log"},
		{name: "..", want: "__.log"},
		{name: "", want: "_.log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logFileName(tt.name); got != tt.want {
				t.Errorf("logFileName(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestFormatLogLine(t *testing.T) {
	at := time.Date(2026, 7, 3, 14, 34, 56, 789_654_000, time.FixedZone("CEST", 2*3600))
	tests := []struct {
		name, tag, text, want string
	}{
		{name: "stderr", tag: TagStderr, text: "listening", want: "2026-07-03T12:34:56.789Z [stderr]     listening\n"},
		{name: "lifecycle", tag: TagLifecycle, text: "running", want: "2026-07-03T12:34:56.789Z [lifecycle]  running\n"},
		{name: "level", tag: "emergency", text: "x", want: "2026-07-03T12:34:56.789Z [emergency]  x\n"},
		{name: "line breaks", tag: "info", text: "a\nb\r\nc\rd", want: "2026-07-03T12:34:56.789Z [info]       a\\nb\\nc\\rd\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatLogLine(at, tt.tag, tt.text); got != tt.want {
				t.Errorf("formatLogLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// logLine matches the start of a line of a server log and captures its tag.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[([a-z]+)\] +`)

// readLog returns the "[tag] text" of each line of a server log file, and
// fails the test on a line that is not in the format.
func readLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		// The tag, in brackets, fills columns 25 to 36, then a space.
		m := logLine.FindStringSubmatch(line)
		if m == nil || len(line) < 38 || strings.TrimRight(line[25:37], " ") != "["+m[1]+"]" || line[37] != ' ' {
			t.Fatalf("malformed log line %q", line)
		}
		out = append(out, "["+m[1]+"] "+line[38:])
	}
	return out
}

func TestServerLog_Rotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs", "mcp") // created at the first line
	var errs []error
	l := newServerLog(dir, "files", 200, func(err error) { errs = append(errs, err) })
	line := strings.Repeat("x", 60) // 25 + 13 + 60 + 1 = 99 bytes a line
	for i := range 5 {
		l.write(TagStderr, line+string(rune('a'+i)))
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	l.write(TagStderr, "after close") // dropped
	path := filepath.Join(dir, "files.log")
	// Two lines fit in 200 bytes: a b → rotated, c d → rotated (replacing
	// the first backup), e.
	if diff := cmp.Diff([]string{"[stderr] " + line + "e"}, readLog(t, path)); diff != "" {
		t.Errorf("current file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"[stderr] " + line + "c", "[stderr] " + line + "d"}, readLog(t, path+".1")); diff != "" {
		t.Errorf("backup (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path + ".2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a second backup exists: %v", err)
	}
	if len(errs) != 0 {
		t.Errorf("write errors: %v", errs)
	}

	// A new log of the same server appends, and rotates by the size on
	// disk.
	l = newServerLog(dir, "files", 200, nil)
	l.write(TagLifecycle, "one")
	l.write(TagLifecycle, strings.Repeat("y", 100))
	l.close()
	if diff := cmp.Diff([]string{"[lifecycle] " + strings.Repeat("y", 100)}, readLog(t, path)); diff != "" {
		t.Errorf("after reopening (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"[stderr] " + line + "e", "[lifecycle] one"}, readLog(t, path+".1")); diff != "" {
		t.Errorf("backup after reopening (-want +got):\n%s", diff)
	}
}

func TestServerLog_Unwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var errs int
	l := newServerLog(filepath.Join(file, "logs"), "x", 0, func(error) { errs++ })
	l.write(TagStderr, "one")
	l.write(TagStderr, "two")
	l.close()
	if errs != 1 {
		t.Errorf("onError called %d times, want once", errs)
	}
	if newServerLog("", "x", 0, nil) != nil {
		t.Error("a log without a directory")
	}
	var none *serverLog
	none.write(TagStderr, "nothing") // a nil log drops lines
}
