package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/maketrace"
	"github.com/tierscope/tierscope/internal/msgtrace"
)

// skewFlags collects repeated --skew NODE=OFFSET flags.
type skewFlags []maketrace.Skew

func (s *skewFlags) String() string {
	parts := make([]string, len(*s))
	for i, k := range *s {
		parts[i] = fmt.Sprintf("%s=%v", k.Node, k.Offset)
	}
	return strings.Join(parts, ",")
}

func (s *skewFlags) Set(v string) error {
	k, err := maketrace.ParseSkew(v)
	if err != nil {
		return err
	}
	*s = append(*s, k)
	return nil
}

func runMaketrace(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("maketrace", "maketrace --config tracelets.yaml --seed 1 [--duration 500s] [--drop-rate 0.01] [--skew NODE=+30ms] --out trace.tsv", stderr)
	var (
		configPath  = fs.String("config", "", "tracelet configuration (YAML), e.g. testdata/multitier.yaml")
		seed        = fs.Uint64("seed", 1, "random seed; the same seed gives the same trace")
		duration    = fs.Duration("duration", 0, "trace length (default: the config's duration)")
		dropRate    = fs.Float64("drop-rate", 0, "target fraction of messages a rate-limited sniffer drops (paper 001 §7.5.5)")
		captureRate = fs.Float64("capture-rate", 0, "sniffer peak capture rate in messages/s (overrides --drop-rate)")
		queue       = fs.Int("queue", 0, "sniffer queue length in messages (default 64)")
		load        = fs.Float64("load", 1, "multiply every tracelet's parallel instances by this factor (parallelism sweeps, paper 001 §7.5.3)")
		out         = fs.String("out", "", "output trace file (default standard output)")
		skews       skewFlags
	)
	fs.Var(&skews, "skew", "clock skew NODE=OFFSET added to the messages NODE sends, e.g. WS2=+20ms (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *configPath == "":
		return usagef("--config is required")
	case *duration < 0:
		return usagef("--duration must be > 0")
	case !(*dropRate >= 0 && *dropRate < 1):
		return usagef("--drop-rate must be in [0, 1)")
	case *captureRate < 0 || *queue < 0:
		return usagef("--capture-rate and --queue must be ≥ 0")
	case !(*load > 0) || *load > 1000:
		return usagef("--load must be in (0, 1000]")
	}
	data, err := readFileCapped(*configPath)
	if err != nil {
		return err
	}
	cfg, err := maketrace.ParseConfig(data, *configPath)
	if err != nil {
		return err
	}
	for i := range cfg.Tracelets {
		cfg.Tracelets[i].Instances = max(1, int(math.Round(float64(cfg.Tracelets[i].Instances)**load)))
	}
	start := time.Now()
	tr, st, err := maketrace.Generate(cfg, maketrace.Options{
		Seed: *seed, Duration: *duration, DropRate: *dropRate, CaptureRate: *captureRate, Queue: *queue, Skews: skews,
	})
	if err != nil {
		return err
	}
	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	if err := msgtrace.Write(o, tr); err != nil {
		o.abort()
		return err
	}
	if err := o.commit(); err != nil {
		return err
	}
	summary := fmt.Sprintf("%s: %d messages in %d runs", *configPath, st.Messages, st.Runs)
	if st.CaptureRate > 0 {
		summary += fmt.Sprintf(", sniffer at %.1f msg/s dropped %d (%.2f%%)", st.CaptureRate, st.Dropped, 100*float64(st.Dropped)/float64(st.Messages+st.Dropped))
	}
	fmt.Fprintf(stderr, "%s %s (%.1fs)\n", programName, summary, time.Since(start).Seconds())
	return nil
}
