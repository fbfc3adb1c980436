package admin

import (
	"bytes"
	"net/http"
	"runtime/pprof"
	"time"

	"github.com/labstack/echo/v4"
)

// Bounds of GET /admin/debug/pprof/profile.
const (
	defaultProfileSeconds = 30
	maxProfileSeconds     = 300
)

// cpuProfile serves GET /admin/debug/pprof/profile: the CPU profile of
// the next seconds, in the gzipped protobuf format that `go tool pprof`
// reads, at the path net/http/pprof gives it.
//
// The heap and allocation profiles are left out on purpose: the linker
// turns the runtime's memory profiling off in a binary that cannot read
// it (runtime.disableMemoryProfiling), and serving them would switch it
// on for every process, at about 0.4 MiB of RSS and a sampled stack walk
// every 512 KiB allocated.
func (a *API) cpuProfile(c echo.Context) error {
	n, ok := queryCount(c, "seconds", defaultProfileSeconds, maxProfileSeconds)
	if !ok {
		return outOfRange(c, "seconds", maxProfileSeconds)
	}
	// The runtime writes the profile from a goroutine of its own as it
	// runs: it goes to a buffer, and to the client whole once it ends.
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return fail(c, http.StatusConflict, "a CPU profile is already being taken; try again when it ends")
	}
	t := time.NewTimer(time.Duration(n) * time.Second)
	select {
	case <-t.C:
	case <-c.Request().Context().Done():
		t.Stop()
	}
	pprof.StopCPUProfile()
	if c.Request().Context().Err() != nil {
		a.logger.Info("cpu profile abandoned: its client went away", "seconds", n)
		return nil // nobody to answer
	}
	a.logger.Info("cpu profile taken", "seconds", n, "bytes", buf.Len())
	return c.Blob(http.StatusOK, echo.MIMEOctetStream, buf.Bytes())
}
