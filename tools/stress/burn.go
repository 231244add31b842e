package main

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// burn keeps n goroutines, each on a thread of its own, spinning until the
// returned stop is called: n CPUs' worth of load the kernel schedules
// against the tests.
func burn(n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			x := uint64(1)
			for !done.Load() {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sink.Add(x)
		}()
	}
	return func() {
		done.Store(true)
		wg.Wait()
	}
}

// sink keeps the burners' arithmetic from being optimized away.
var sink atomic.Uint64
