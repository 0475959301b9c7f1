package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/leaseapi"
)

// runInject is the operators' client of the injector extension's leases API
// (injector/README.md): start a square-wave perturbation, look at it, renew it,
// stop it.
func runInject(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("inject needs a subcommand: delay, cpufreq, capacity, status, renew, stop or health")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("inject "+sub+" [flags]", "inject delay --link 10.0.0.2:3306 --amplitude 5ms --period 8s --cycles 4", stderr)
	var (
		endpoint  = fs.String("endpoint", "http://127.0.0.1:18777", "the injector's API")
		tokenFile = fs.String("token-file", "", "file holding the bearer token (default: $INJECTOR_TOKEN)")
		link      = fs.String("link", "", "delay: the link's destination host:port")
		proto     = fs.String("proto", "tcp", "delay: tcp or udp")
		direction = fs.String("direction", "out", "delay: out (packets this host sends) or in")
		cpus      = fs.String("cpus", "", "cpufreq: CPUs, comma-separated")
		cgroup    = fs.String("cgroup", "", "capacity: the cgroup path below the cgroup root")
		amplitude = fs.String("amplitude", "", "delay: a duration (5ms); cpufreq: kHz below the base; capacity: the fraction withheld (0.2)")
		floor     = fs.String("floor", "", "delay: a duration every packet is held under the wave (0.3ms); capacity: the fraction withheld in the off-phases, negative to grant (-0.1 centers an amplitude of 0.2)")
		period    = fs.Duration("period", 8*time.Second, "square-wave period (50% duty cycle)")
		cycles    = fs.Int("cycles", 0, "number of periods (0: until the lease ends)")
		single    = fs.Bool("single", false, "one on-phase only (the adaptive phase)")
		duration  = fs.Duration("duration", time.Minute, "lease duration")
	)
	id := ""
	if sub == "status" || sub == "renew" || sub == "stop" {
		var rest []string
		id, rest = splitLeaseID(args)
		args = rest
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	token := os.Getenv("INJECTOR_TOKEN")
	if *tokenFile != "" {
		data, err := readFileCapped(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(data))
	}
	c := injectClient{leaseapi.NewClient(strings.TrimRight(*endpoint, "/"), token, &http.Client{Transport: &http.Transport{Proxy: nil}}), stdout}

	switch sub {
	case "delay", "cpufreq", "capacity":
		req := leaseapi.Request{Kind: sub, Duration: duration.String(),
			Wave: leaseapi.Wave{Period: period.String(), Cycles: *cycles, Single: *single}}
		amp, err := parseAmplitude(sub, *amplitude)
		if err != nil {
			return usageError{err.Error()}
		}
		req.Wave.Amplitude = amp
		if *floor != "" {
			if req.Wave.Floor, err = parseFloor(sub, *floor); err != nil {
				return usageError{err.Error()}
			}
		}
		switch sub {
		case "delay":
			host, port, err := net.SplitHostPort(*link)
			if err != nil {
				return usagef("--link must be host:port, not %q", *link)
			}
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return usagef("--link port %q: %v", port, err)
			}
			req.Target.Link = &leaseapi.Link{Proto: *proto, Dst: host, DstPort: uint16(p), Direction: *direction}
		case "cpufreq":
			list, err := parseInts(*cpus)
			if err != nil || len(list) == 0 {
				return usagef("--cpus must list CPUs, e.g. 2,3")
			}
			req.Target.CPUs = list
		case "capacity":
			if *cgroup == "" {
				return usagef("--cgroup is required")
			}
			req.Target.Cgroup = *cgroup
		}
		return c.call(http.MethodPost, leaseapi.PathLeases, req)
	case "status", "renew", "stop":
		if id == "" {
			return usagef("inject %s needs a lease id: tierscope inject %s ID", sub, sub)
		}
		path := leaseapi.PathLeases + "/" + url.PathEscape(id)
		switch sub {
		case "status":
			return c.call(http.MethodGet, path, nil)
		case "renew":
			return c.call(http.MethodPost, path+"/renew", leaseapi.Renewal{Duration: duration.String()})
		default:
			return c.call(http.MethodDelete, path, nil)
		}
	case "health":
		return c.call(http.MethodGet, leaseapi.PathHealth, nil)
	}
	return usagef("unknown inject subcommand %q (delay, cpufreq, capacity, status, renew, stop, health)", sub)
}

// splitLeaseID takes the lease id, the first argument that is neither a flag nor a
// flag's value, out of args.
func splitLeaseID(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") && i+1 < len(args) && a != "-h" && a != "--help" {
				i++ // the flag's value
			}
			continue
		}
		rest := append(append([]string{}, args[:i]...), args[i+1:]...)
		return a, rest
	}
	return "", args
}

func parseAmplitude(kind, s string) (float64, error) {
	if s == "" {
		return 0, fmt.Errorf("--amplitude is required")
	}
	if kind == "delay" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("--amplitude for delay is a positive duration such as 5ms, not %q", s)
		}
		return float64(d) / float64(time.Millisecond), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--amplitude must be a positive number, not %q", s)
	}
	return v, nil
}

// parseFloor reads --floor: ms of delay for a delay lease, a fraction for a
// capacity lease; the injector checks the ranges.
func parseFloor(kind, s string) (float64, error) {
	switch kind {
	case "delay":
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("--floor for delay is a duration such as 0.3ms, not %q", s)
		}
		return float64(d) / float64(time.Millisecond), nil
	case "capacity":
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("--floor for capacity is a fraction such as -0.1, not %q", s)
		}
		return v, nil
	}
	return 0, fmt.Errorf("--floor applies to delay and capacity leases, not %s", kind)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// injectClient sends the injector's lease API requests (internal/leaseapi)
// and prints each answer as the injector wrote it.
type injectClient struct {
	api *leaseapi.Client
	out io.Writer
}

// call sends one request and prints the JSON answer; an error status is an
// error carrying the injector's message.
func (c injectClient) call(method, path string, body any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var answer json.RawMessage
	if err := c.api.Do(ctx, method, path, body, &answer); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.out, "%s\n", bytes.TrimSpace(answer))
	return err
}
