package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// statLine is a /proc/PID/stat line with the given command name, ppid,
// utime, stime and starttime, the other fields as a real one has them.
func statLine(comm string, ppid, utime, stime, start string) string {
	return "4242 (" + comm + ") S " + ppid + " 4242 4242 34816 4242 4194304 1290 0 0 0 " +
		utime + " " + stime + " 0 0 20 0 1 0 " + start + " 9027584 1024 18446744073709551615 1 1 0 0 0 0 65536 3686404 1266761467 0 0 0 17 1 0 0 0 0 0\n"
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    procStat
		wantErr bool
	}{
		{name: "plain", in: statLine("mcpgw", "1", "150", "25", "98765"), want: procStat{ppid: 1, ticks: 175, start: 98765}},
		{name: "spaces in the name", in: statLine("tmux: server", "77", "1", "2", "3"), want: procStat{ppid: 77, ticks: 3, start: 3}},
		{name: "parentheses in the name", in: statLine("a) 9 9 (b) c", "12", "10", "20", "30"), want: procStat{ppid: 12, ticks: 30, start: 30}},
		{name: "empty name", in: statLine("", "5", "0", "0", "1"), want: procStat{ppid: 5, start: 1}},
		{name: "no name", in: "4242 S 1 2 3", wantErr: true},
		{name: "cut short", in: "4242 (x) S 1 2 3 4\n", wantErr: true},
		{name: "not a number", in: statLine("x", "1", "ten", "0", "1"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseStat succeeded: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(procStat{})); diff != "" {
				t.Errorf("parseStat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tmcpgw\nVmPeak:\t  800000 kB\nVmHWM:\t   30720 kB\nVmRSS:\t   25600 kB\nThreads:\t9\n"
	got, err := parseStatus([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := (memStatus{rss: 25600 << 10, hwm: 30720 << 10}); got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
	if got, err := parseStatus([]byte("Name:\tkthreadd\nThreads:\t1\n")); err != nil || got != (memStatus{}) {
		t.Errorf("kernel thread: %+v, %v; want zero", got, err)
	}
	if _, err := parseStatus([]byte("VmRSS:\t12 MB\n")); err == nil {
		t.Error("a unit other than kB was accepted")
	}
}

// TestWatcher_Self watches the test process itself through the real /proc.
func TestWatcher_Self(t *testing.T) {
	w, err := newWatcher(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	w.start()
	end := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(end) { // burn some CPU
	}
	w.stop()
	rep, err := w.report(10)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PID != os.Getpid() || rep.RSSMiB <= 0 || rep.PeakRSSMiB < rep.RSSMiB || rep.CPUMs < 0 {
		t.Errorf("report = %+v", rep)
	}
	if _, err := newWatcher(1 << 30); err == nil || !strings.Contains(err.Error(), "watching process") {
		t.Errorf("watching a pid that does not exist: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	seq := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i + 1)
		}
		return s
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", seq(1), 50, 1},
		{"one p99", seq(1), 99, 1},
		{"100 p50", seq(100), 50, 50},
		{"100 p90", seq(100), 90, 90},
		{"100 p99", seq(100), 99, 99},
		{"100 p100", seq(100), 100, 100},
		{"10 p99", seq(10), 99, 10},
		{"10 p50", seq(10), 50, 5},
		{"3 p50", seq(3), 50, 2},
		{"1000 p99", seq(1000), 99, 990},
		{"1001 p90", seq(1001), 90, 901},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%d) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}
