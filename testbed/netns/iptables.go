package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

// IPTablesEnv, when set, names the only iptables binary the harness may use
// (e.g. iptables-legacy); otherwise the backend is chosen by a probe.
const IPTablesEnv = nfqdelay.IPTablesEnv

var (
	backendMu     sync.Mutex
	backendChosen string
)

// iptablesCandidates lists the iptables binaries to try: $TIERSCOPE_IPTABLES
// alone when set, else every kernel backend once, in the delay engine's order.
func iptablesCandidates() []string {
	if v := os.Getenv(IPTablesEnv); v != "" {
		if p, err := lookPath(v); err == nil {
			v = p
		}
		return []string{v}
	}
	return nfqdelay.Backends()
}

// IPTablesBackend is the iptables binary the delay loops of this process
// use, or "" if none has been chosen yet (the choice is made by the first
// Host.StartDelay).
func IPTablesBackend() string {
	backendMu.Lock()
	defer backendMu.Unlock()
	return backendChosen
}

// chooseBackend returns the iptables binary to use, probing the candidates in
// h the first time: a backend is chosen only if a tagged NFQUEUE rule added
// with it really sends packets to a queue opened in h and the verdicts
// release them (a SYN to a listener on h's loopback, through a zero-delay
// loop). Accepting the rule is not enough: a backend that accepts it but
// does not queue, or queues without honouring verdicts, is skipped.
func chooseBackend(h *Host) (string, error) {
	backendMu.Lock()
	defer backendMu.Unlock()
	if backendChosen != "" {
		return backendChosen, nil
	}
	cands := iptablesCandidates()
	if len(cands) == 0 {
		return "", errNoBackend
	}
	var errs []error
	for _, bin := range cands {
		if err := probeBackend(h, bin); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", bin, err))
			continue
		}
		backendChosen = bin
		return bin, nil
	}
	return "", fmt.Errorf("netns: no iptables backend delivers packets to NFQUEUE here: %w", errors.Join(errs...))
}

func probeBackend(h *Host, bin string) error {
	ln, err := h.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	d, err := h.startDelay(bin, DelayOptions{Chain: "OUTPUT", OutIface: "lo", DstPort: port, Lease: 10 * time.Second})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, dialErr := h.DialContext(ctx, "tcp4", ln.Addr().String())
	if c != nil {
		_ = c.Close()
	}
	st, stopErr := d.Stop()
	switch {
	case stopErr != nil:
		return stopErr
	case st.Count == 0 && dialErr == nil:
		return errors.New("the rule was accepted but no packet reached the queue")
	case dialErr != nil:
		return fmt.Errorf("packets were queued (%d seen) but not released by verdicts: %w", st.Count, dialErr)
	}
	return nil
}
