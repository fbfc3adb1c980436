package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The modes of a report.
const (
	modeHTTP   = "http"
	modeDirect = "direct"
	modeIdle   = "idle"
	modeTask   = "task"
)

// report is the outcome of one run, printed as text or, with -json, as one
// JSON object with these snake_case fields. Values are in the unit their
// name says, rounded to 0.1 (durations in seconds to the millisecond).
type report struct {
	Mode       string  `json:"mode"`
	Target     string  `json:"target"`                // the URL, or the command line
	InitTarget string  `json:"init_target,omitempty"` // -init-url
	Method     string  `json:"method,omitempty"`
	Tool       string  `json:"tool,omitempty"`
	Payload    int     `json:"payload,omitempty"`
	Sessions   int     `json:"sessions"`
	DurationS  float64 `json:"duration_s"` // measured, or -idle's hold
	Requests   int64   `json:"requests"`   // that succeeded
	Errors     int64   `json:"errors"`
	RPS        float64 `json:"rps"` // successful requests per second

	Latency *latencyReport `json:"latency_us,omitempty"`
	Tools   *int           `json:"tools,omitempty"` // on the tools/list page

	BenchCPUMs       float64 `json:"bench_cpu_ms"`
	BenchCPUUsPerReq float64 `json:"bench_cpu_us_per_req"`

	Task *taskReport `json:"task,omitempty"` // -task

	Idle    *idleReport  `json:"idle,omitempty"`
	Watched *watchReport `json:"watched,omitempty"` // the first -watch
	// AlsoWatched are the processes of the further -watch flags, in order.
	AlsoWatched []*watchReport `json:"also_watched,omitempty"`

	ErrorSamples []string `json:"error_samples,omitempty"` // the first few
	Notes        []string `json:"notes,omitempty"`
}

// latencyReport holds exact latency percentiles, in µs.
type latencyReport struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// watchReport is the watched process (-watch, or the -direct child) over
// the measured period; RSS is at its end.
type watchReport struct {
	PID                 int     `json:"pid"`
	CPUMs               float64 `json:"cpu_ms"`
	CPUUsPerReq         float64 `json:"cpu_us_per_req"`
	Children            int     `json:"children"` // descendants at the end
	ChildrenCPUMs       float64 `json:"children_cpu_ms"`
	ChildrenCPUUsPerReq float64 `json:"children_cpu_us_per_req"`
	PeakRSSMiB          float64 `json:"peak_rss_mib"` // VmHWM
	RSSMiB              float64 `json:"rss_mib"`      // VmRSS
	ChildrenRSSMiB      float64 `json:"children_rss_mib"`
}

// taskReport is what -task counted over the whole run, warmup included:
// the tasks made and the tasks/get sent to see them to their ends.
type taskReport struct {
	Tasks       int64   `json:"tasks"`
	Gets        int64   `json:"gets"`
	GetsPerTask float64 `json:"gets_per_task"`
}

// idleReport is what -idle measured. The RSS fields need -watch.
type idleReport struct {
	OpenS            float64  `json:"open_s"` // to open every session and stream
	StreamsEnded     int64    `json:"streams_ended"`
	RSSBeforeMiB     *float64 `json:"rss_before_mib,omitempty"`
	RSSMiB           *float64 `json:"rss_mib,omitempty"`
	RSSPerSessionKiB *float64 `json:"rss_per_session_kib,omitempty"`
}

// newLoadReport fills the fields common to http and direct mode.
func newLoadReport(mode, target string, c *config, res loadResult) *report {
	r := &report{
		Mode:         mode,
		Target:       target,
		Method:       c.method,
		Payload:      c.payload,
		Sessions:     c.sessions,
		DurationS:    round6(res.elapsed.Seconds()), // a -requests run may take under a millisecond
		Requests:     res.ok,
		Errors:       res.errors,
		ErrorSamples: res.errorSamples,
		BenchCPUMs:   ms(res.cpu),
	}
	if c.method == "tools/call" {
		r.Tool = c.tool
	} else {
		r.Tools = &res.tools
	}
	if res.elapsed > 0 {
		r.RPS = round1(float64(res.ok) / res.elapsed.Seconds())
	}
	r.BenchCPUUsPerReq = perReq(res.cpu, res.ok)
	if len(res.samples) > 0 {
		r.Latency = &latencyReport{
			P50: us(percentile(res.samples, 50)),
			P90: us(percentile(res.samples, 90)),
			P99: us(percentile(res.samples, 99)),
			Max: us(res.samples[len(res.samples)-1]),
		}
	}
	if !res.measured {
		r.Notes = append(r.Notes, "the run ended before the measured period began")
	}
	return r
}

// addWatched adds what each watcher measured over the run (or why it has
// nothing) to rep: the first as Watched, the others as AlsoWatched. Nil
// watchers are skipped.
func addWatched(rep *report, res loadResult, ws ...*watcher) {
	if !res.measured {
		return
	}
	first := true
	for _, w := range ws {
		if w == nil {
			continue
		}
		wr, err := w.report(res.ok)
		switch {
		case err != nil:
			rep.Notes = append(rep.Notes, err.Error())
		case first:
			rep.Watched = wr
		default:
			rep.AlsoWatched = append(rep.AlsoWatched, wr)
		}
		if first && err == nil {
			rep.Notes = append(rep.Notes, tickNote(res.elapsed))
		}
		first = false
	}
}

// write prints the report as text or as one JSON object.
func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	var b strings.Builder
	r.writeText(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *report) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "mode=%s target=%s", r.Mode, quoteIfSpaced(r.Target))
	if r.InitTarget != "" {
		fmt.Fprintf(b, " init_target=%s", quoteIfSpaced(r.InitTarget))
	}
	if r.Method != "" {
		fmt.Fprintf(b, " method=%s", r.Method)
	}
	if r.Tool != "" {
		fmt.Fprintf(b, " tool=%s", quoteIfSpaced(r.Tool))
	}
	if r.Payload > 0 {
		fmt.Fprintf(b, " payload=%d", r.Payload)
	}
	prec := 1
	switch {
	case r.DurationS < 0.001:
		prec = 6 // a run of a few fast -requests
	case r.DurationS < 1:
		prec = 3 // a short run, such as one cut short by -requests
	}
	fmt.Fprintf(b, " sessions=%d duration=%.*fs\n", r.Sessions, prec, r.DurationS)
	if r.Idle != nil {
		r.writeIdle(b)
	} else {
		fmt.Fprintf(b, "requests=%d errors=%d rps=%.1f\n", r.Requests, r.Errors, r.RPS)
		if l := r.Latency; l != nil {
			fmt.Fprintf(b, "latency_us p50=%.1f p90=%.1f p99=%.1f max=%.1f\n", l.P50, l.P90, l.P99, l.Max)
		}
		if r.Tools != nil {
			fmt.Fprintf(b, "tools=%d\n", *r.Tools)
		}
		if t := r.Task; t != nil {
			fmt.Fprintf(b, "tasks=%d tasks_get=%d gets_per_task=%.2f\n", t.Tasks, t.Gets, t.GetsPerTask)
		}
		fmt.Fprintf(b, "bench_cpu_us_per_req=%.1f bench_cpu_ms=%.1f\n", r.BenchCPUUsPerReq, r.BenchCPUMs)
	}
	for _, w := range append([]*watchReport{r.Watched}, r.AlsoWatched...) {
		switch {
		case w == nil:
		case r.Idle != nil: // no requests to divide by
			fmt.Fprintf(b, "watched pid=%d cpu_ms=%.1f children=%d children_cpu_ms=%.1f peak_rss_mib=%.1f rss_mib=%.1f children_rss_mib=%.1f\n",
				w.PID, w.CPUMs, w.Children, w.ChildrenCPUMs, w.PeakRSSMiB, w.RSSMiB, w.ChildrenRSSMiB)
		default:
			fmt.Fprintf(b, "watched pid=%d cpu_ms=%.1f cpu_us_per_req=%.1f children=%d children_cpu_ms=%.1f children_cpu_us_per_req=%.1f peak_rss_mib=%.1f rss_mib=%.1f children_rss_mib=%.1f\n",
				w.PID, w.CPUMs, w.CPUUsPerReq, w.Children, w.ChildrenCPUMs, w.ChildrenCPUUsPerReq, w.PeakRSSMiB, w.RSSMiB, w.ChildrenRSSMiB)
		}
	}
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(b, "error: %s\n", e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(b, "note: %s\n", n)
	}
}

func (r *report) writeIdle(b *strings.Builder) {
	i := r.Idle
	fmt.Fprintf(b, "errors=%d open_s=%.3f streams_ended=%d", r.Errors, i.OpenS, i.StreamsEnded)
	if i.RSSPerSessionKiB != nil {
		fmt.Fprintf(b, " rss_before_mib=%.1f rss_mib=%.1f rss_per_session_kib=%.1f", *i.RSSBeforeMiB, *i.RSSMiB, *i.RSSPerSessionKiB)
	}
	b.WriteByte('\n')
}

func quoteIfSpaced(s string) string {
	if strings.ContainsAny(s, " \t\"") {
		return strconv.Quote(s)
	}
	return s
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func us(d time.Duration) float64 { return round1(float64(d) / float64(time.Microsecond)) }

func ms(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func mib(bytes int64) float64 { return round1(float64(bytes) / (1 << 20)) }

// perReq is d per request in µs, or 0 for no requests.
func perReq(d time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return round1(float64(d) / float64(time.Microsecond) / float64(n))
}
