//go:build race

package rawio

import (
	"runtime"
	"unsafe"
)

// ioSync stands, for the race detector, for what passes through a
// descriptor: as package syscall's Read and Write do, a write releases
// it and a read acquires it, so that what a goroutine did before writing
// happens before what another does after reading the bytes. And the
// detector is told which bytes the kernel read and wrote.
var ioSync int64

func raceAfterRead(p []byte) {
	if len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
	runtime.RaceAcquire(unsafe.Pointer(&ioSync))
}

func raceBeforeWrite(p []byte) {
	runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync))
	if len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}
