package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// IPTablesEnv, when set, names the only iptables binary the harness may use
// (e.g. iptables-legacy); otherwise the backend is chosen by a probe.
const IPTablesEnv = "TIERSCOPE_IPTABLES"

var (
	backendMu     sync.Mutex
	backendChosen string
)

// iptablesCandidates lists the iptables binaries to try, most preferred first:
// iptables-legacy (the x_tables path, xt_NFQUEUE), then iptables-nft (x_tables
// targets through nft_compat), then whatever `iptables` is. Binaries that
// resolve to the same file (iptables -> alternatives -> iptables-nft) are
// tried once.
func iptablesCandidates() []string {
	if v := os.Getenv(IPTablesEnv); v != "" {
		if p, err := lookPath(v); err == nil {
			v = p
		}
		return []string{v}
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range []string{"iptables-legacy", "iptables-nft", "iptables"} {
		p, err := lookPath(n)
		if err != nil {
			continue
		}
		key := iptablesMode(p)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, p)
	}
	return out
}

// iptablesMode is "legacy" or "nft" for the binary at p, judged by its name
// and by the file it resolves to (iptables -> /etc/alternatives/iptables ->
// iptables-nft -> xtables-nft-multi), or the resolved path if neither says.
func iptablesMode(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		r = p
	}
	for _, name := range []string{filepath.Base(p), filepath.Base(r)} {
		switch {
		case strings.Contains(name, "legacy"):
			return "legacy"
		case strings.Contains(name, "nft"):
			return "nft"
		}
	}
	return r
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
		return "", errors.New("netns: no iptables binary found: apt-get install -y iptables")
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

// iptables runs bin with args inside namespace ns ("" = this process's
// namespace), waiting for the xtables lock.
func iptables(ns, bin string, args ...string) (string, error) {
	full := append([]string{"-w", "10"}, args...)
	if ns == "" {
		return run(bin, full...)
	}
	return run("ip", append([]string{"netns", "exec", ns, bin}, full...)...)
}

// removeTaggedRules deletes, in namespace ns ("" = this process's namespace),
// every rule listed by <bin>-save whose comment starts with RuleTagPrefix and
// satisfies match. Listing is read-only (iptables-save creates no table);
// nothing else is touched.
func removeTaggedRules(ns, bin string, match func(tag string) bool) error {
	save := bin + "-save"
	if _, err := lookPath(save); err != nil {
		return nil // nothing to list with; a namespace's rules go with it anyway
	}
	var out string
	var err error
	if ns == "" {
		out, err = run(save)
	} else {
		out, err = run("ip", "netns", "exec", ns, save)
	}
	if err != nil {
		if ns != "" && !namespaceExists(ns) {
			return nil
		}
		return err
	}
	var errs []error
	table := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			continue
		}
		if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, RuleTagPrefix) {
			continue
		}
		f := splitRule(line)
		tag := ""
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--comment" {
				tag = f[i+1]
			}
		}
		if !strings.HasPrefix(tag, RuleTagPrefix) || !match(tag) {
			continue
		}
		f[0] = "-D"
		if _, err := iptables(ns, bin, append([]string{"-t", table}, f...)...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// splitRule splits an iptables-save line into arguments, honouring double
// quotes and backslash escapes inside them.
func splitRule(line string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQ && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQ, have = !inQ, true
		case !inQ && (c == ' ' || c == '\t'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
