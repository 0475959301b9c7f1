// Package parallel runs independent pieces of work on every CPU.
package parallel

import (
	"runtime"
	"sync"
)

// Do calls f(i) for every i in [0, n), at most GOMAXPROCS calls at a time,
// and returns when all have returned. Each f(i) writes only its own results,
// so the outcome is that of calling them in order.
func Do(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}
