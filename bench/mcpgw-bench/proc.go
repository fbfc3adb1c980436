package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: 1/USER_HZ,
// which Linux fixes at 100 whatever the kernel's own HZ.
const clockTick = 10 * time.Millisecond

// procStat is what the tool reads of /proc/PID/stat (proc(5)).
type procStat struct {
	ppid  int
	ticks int64  // utime + stime, in clock ticks
	start uint64 // starttime: with the pid, it names one process
}

// parseStat parses the contents of /proc/PID/stat. The second field, the
// command name in parentheses, may itself contain spaces and parentheses,
// so the fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat: no command name")
	}
	// f[0] is field 3 (state), so field n of proc(5) is f[n-3]: ppid is 4,
	// utime 14, stime 15, starttime 22.
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("malformed stat: %d fields after the command name", len(f))
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	utime, err2 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err3 := strconv.ParseInt(string(f[12]), 10, 64)
	start, err4 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return procStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return procStat{ppid: ppid, ticks: utime + stime, start: start}, nil
}

// memStatus is the memory of a process from /proc/PID/status, in bytes.
type memStatus struct {
	rss int64 // VmRSS: resident now
	hwm int64 // VmHWM: the peak of VmRSS
}

// parseStatus reads VmRSS and VmHWM ("VmRSS:\t  1234 kB") from the
// contents of /proc/PID/status. A kernel thread has neither: zero.
func parseStatus(b []byte) (memStatus, error) {
	var m memStatus
	for line := range bytes.Lines(b) {
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &m.rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &m.hwm
		default:
			continue
		}
		f := bytes.Fields(line[6:])
		if len(f) != 2 || string(f[1]) != "kB" {
			return m, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return m, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
		}
		*dst = kb << 10
	}
	return m, nil
}

// procKey names one process: a pid and its start time, so that a reused
// pid is not taken for the process that had it.
type procKey struct {
	pid   int
	start uint64
}

// procTree is a process and its descendants at one moment.
type procTree struct {
	self procStat
	desc map[procKey]procStat
}

// readTree reads /proc (root) for process pid and all its descendants,
// found by walking every /proc/*/stat by ppid. It fails only when pid
// itself cannot be read; processes that vanish during the walk are left
// out.
func readTree(root string, pid int) (procTree, error) {
	self, err := readStat(root, pid)
	if err != nil {
		return procTree{}, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return procTree{}, err
	}
	children := map[int][]int{}
	stats := map[int]procStat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		st, err := readStat(root, p)
		if err != nil {
			continue // gone, or not a process
		}
		stats[p] = st
		children[st.ppid] = append(children[st.ppid], p)
	}
	t := procTree{self: self, desc: map[procKey]procStat{}}
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		st := stats[p]
		t.desc[procKey{p, st.start}] = st
		queue = append(queue, children[p]...)
	}
	return t, nil
}

func readStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func readStatus(root string, pid int) (memStatus, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "status"))
	if err != nil {
		return memStatus{}, err
	}
	return parseStatus(b)
}

// watcher measures a process and its descendants over a period: call start
// and stop at its two ends. A descendant that appears during the period
// counts all its CPU time; one that ends during it is missed (its time goes
// to its parent's cutime, which the tool does not read).
type watcher struct {
	root  string
	pid   int
	begin procTree
	end   procTree
	mem   memStatus
	// childRSS is the descendants' summed VmRSS at the end, in bytes.
	childRSS int64
	err      error // the first failure; the report then has no numbers
}

func newWatcher(pid int) (*watcher, error) {
	w := &watcher{root: "/proc", pid: pid}
	if _, err := readStat(w.root, pid); err != nil {
		return nil, fmt.Errorf("watching process %d: %w", pid, err)
	}
	return w, nil
}

// watchers are the watchers of -watch, in its order, started and stopped
// together.
type watchers []*watcher

// newWatchers returns a watcher of each pid.
func newWatchers(pids []int) (watchers, error) {
	ws := make(watchers, 0, len(pids))
	for _, pid := range pids {
		w, err := newWatcher(pid)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

func (ws watchers) start() {
	for _, w := range ws {
		w.start()
	}
}

func (ws watchers) stop() {
	for _, w := range ws {
		w.stop()
	}
}

// memory returns the watched process's memory now.
func (w *watcher) memory() (memStatus, error) { return readStatus(w.root, w.pid) }

func (w *watcher) start() {
	w.begin, w.err = readTree(w.root, w.pid)
}

func (w *watcher) stop() {
	if w.err != nil {
		return
	}
	if w.end, w.err = readTree(w.root, w.pid); w.err != nil {
		return
	}
	if w.mem, w.err = w.memory(); w.err != nil {
		return
	}
	for k := range w.end.desc {
		if m, err := readStatus(w.root, k.pid); err == nil {
			w.childRSS += m.rss
		}
	}
}

// cpu returns the CPU time of the process and of its descendants over the
// period.
func (w *watcher) cpu() (self, children time.Duration) {
	self = time.Duration(w.end.self.ticks-w.begin.self.ticks) * clockTick
	var ticks int64
	for k, st := range w.end.desc {
		ticks += st.ticks - w.begin.desc[k].ticks // zero when it appeared later
	}
	return self, time.Duration(ticks) * clockTick
}

// report returns the watched process's part of the report, for ok
// requests.
func (w *watcher) report(ok int64) (*watchReport, error) {
	if w.err != nil {
		return nil, fmt.Errorf("watching process %d: %w", w.pid, w.err)
	}
	self, children := w.cpu()
	return &watchReport{
		PID:                 w.pid,
		CPUMs:               ms(self),
		CPUUsPerReq:         perReq(self, ok),
		Children:            len(w.end.desc),
		ChildrenCPUMs:       ms(children),
		ChildrenCPUUsPerReq: perReq(children, ok),
		PeakRSSMiB:          mib(w.mem.hwm),
		RSSMiB:              mib(w.mem.rss),
		ChildrenRSSMiB:      mib(w.childRSS),
	}, nil
}

// tickNote is the report's note on the precision of /proc CPU times.
func tickNote(period time.Duration) string {
	return fmt.Sprintf("CPU times from /proc are counted in %v ticks (USER_HZ 100), so each is exact to about ±%v over the %.1fs measured: runs must be long enough for that to be small", clockTick, clockTick, period.Seconds())
}
