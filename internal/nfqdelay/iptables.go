package nfqdelay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/owner"
)

// inNS runs fn on a fresh thread inside the network namespace nsFD (child
// processes it starts inherit the namespace). A thread that cannot be
// restored stays locked, so the Go runtime destroys it.
func inNS(nsFD int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cur, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("nfqdelay: open current namespace: %w", err)
			return
		}
		defer unix.Close(cur)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("nfqdelay: setns: %w", err)
			return
		}
		e := fn()
		if unix.Setns(cur, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- e
	}()
	return <-errc
}

func runIPT(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := append([]string{"-w", "10"}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("nfqdelay: %s %s: %w: %s", bin, strings.Join(full, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Backends lists the iptables binaries there are, each kernel backend once:
// $TIERSCOPE_IPTABLES or iptables, then iptables-legacy and iptables-nft.
func Backends() []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range []string{os.Getenv(IPTablesEnv), "iptables", "iptables-legacy", "iptables-nft"} {
		if n == "" {
			continue
		}
		p, err := exec.LookPath(n)
		if err != nil {
			continue
		}
		if _, err := exec.LookPath(p + "-save"); err != nil {
			continue
		}
		key := mode(p)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, p)
	}
	return out
}

func mode(p string) string {
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

// Rule is a tagged rule found by Rules.
type Rule struct {
	Backend string   // iptables binary
	Table   string   // e.g. filter
	Args    []string // "-A", chain, spec...
	Tag     string
}

// Rules lists, in the current network namespace and over every iptables
// backend, the rules whose comment starts with tagPrefix (which must start
// with TagPrefix). Listing is read-only.
func Rules(tagPrefix string) ([]Rule, error) {
	if !strings.HasPrefix(tagPrefix, TagPrefix) {
		return nil, fmt.Errorf("nfqdelay: tag prefix %q does not start with %q", tagPrefix, TagPrefix)
	}
	var rules []Rule
	var errs []error
	for _, bin := range Backends() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin+"-save").Output()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("nfqdelay: %s-save: %w", bin, err))
			continue
		}
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "*") {
				table = line[1:]
				continue
			}
			if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, tagPrefix) {
				continue
			}
			f := splitRule(line)
			tag := ""
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "--comment" {
					tag = f[i+1]
				}
			}
			if strings.HasPrefix(tag, tagPrefix) {
				rules = append(rules, Rule{Backend: bin, Table: table, Args: f, Tag: tag})
			}
		}
	}
	return rules, errors.Join(errs...)
}

// Sweep deletes, in the current network namespace and over every iptables
// backend, the rules whose comment starts with tagPrefix (at least
// TagPrefix), and returns how many it deleted. It is meant for rules left by
// a dead process: the injector calls it when it starts, before its first
// Start; it must not be given a prefix that matches a live Delayer's tag.
func Sweep(tagPrefix string) (int, error) {
	return sweep(tagPrefix, func(string) bool { return true })
}

// SweepStale deletes the tagged rules whose owner (owner.Self of the
// process that added them) is no longer running, and rules without an
// owner, left by versions before owners; rules of live processes, this one
// included, stay. It returns how many it deleted.
func SweepStale() (int, error) {
	return sweep(TagPrefix, func(tag string) bool {
		id, ok := owner.Parse(strings.TrimPrefix(tag, TagPrefix))
		return !ok || !owner.Alive(id)
	})
}

// SweepOwned deletes every rule of this process whose ID starts with
// idPrefix (a group of Delayers, such as one injector's), alive or not: the
// hang watchdog's fail-open. ownerID is the owner.Self of the process that
// added them.
func SweepOwned(ownerID, idPrefix string) (int, error) {
	return sweep(TagPrefix+ownerID+"-"+idPrefix, func(string) bool { return true })
}

func sweep(tagPrefix string, stale func(tag string) bool) (int, error) {
	rules, err := Rules(tagPrefix)
	errs := []error{err}
	n := 0
	for _, r := range rules {
		if !stale(r.Tag) {
			continue
		}
		args := append([]string{"-t", r.Table, "-D"}, r.Args[1:]...)
		if _, err := runIPT(r.Backend, args...); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
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
