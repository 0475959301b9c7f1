// Package freeport gives tests TCP ports on 127.0.0.1 that were free a moment
// ago, never the same port twice in one process: the kernel may hand a port
// that was just closed out again at once, and a test that asked for two ports
// in a row was once given the same one for two listeners.
package freeport

import (
	"fmt"
	"net"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// TCP returns a port that was free a moment ago and that TCP has not returned
// before in this process.
func TCP() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		mu.Lock()
		fresh := !given[port]
		given[port] = true
		mu.Unlock()
		if fresh {
			return port, nil
		}
	}
	return 0, fmt.Errorf("freeport: no port not given before in 100 tries")
}
