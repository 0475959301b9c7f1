package main

import (
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/load"
)

func attrString(k, v string) attribute.KeyValue { return attribute.String(k, v) }

func runTruth(e env, args []string) error {
	fs := newFlagSet("truth [--config FILE]", e.stderr)
	var path string
	fs.StringVar(&path, "config", "", "configuration file (default: the embedded testbed.yaml)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(cfg.Truth(), "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", out)
	return err
}

func runLoad(e env, args []string) error {
	fs := newFlagSet("load --target URL [--mode closed|open] [--mix browsing|shopping|ordering|nonstationary] [--users N] [--rate R] [--duration 90s] [--seed 1] [--config FILE]", e.stderr)
	var opt load.Options
	var path string
	fs.StringVar(&opt.Target, "target", "", "web base URL, e.g. http://127.0.0.1:18080")
	fs.StringVar(&opt.Mode, "mode", "closed", "closed (users with think times) or open (Poisson session arrivals)")
	fs.StringVar(&opt.Mix, "mix", "shopping", "browsing, shopping, ordering or nonstationary")
	fs.IntVar(&opt.Users, "users", 10, "closed loop: emulated browsers")
	fs.Float64Var(&opt.Rate, "rate", 2, "open loop: sessions per second")
	fs.DurationVar(&opt.Duration, "duration", 90*time.Second, "how long to run (0: until interrupted)")
	fs.Uint64Var(&opt.Seed, "seed", 1, "seed of every random choice")
	fs.StringVar(&path, "config", "", "configuration whose transactions to request (default: the embedded testbed.yaml)")
	if err := parseFlags(fs, args, "target"); err != nil {
		return err
	}
	if err := checkURL("target", opt.Target); err != nil {
		return err
	}
	switch opt.Mode {
	case "closed", "open":
	default:
		return usagef("--mode %q: want closed or open", opt.Mode)
	}
	switch opt.Mix {
	case "browsing", "shopping", "ordering", "nonstationary":
	default:
		return usagef("--mix %q: want browsing, shopping, ordering or nonstationary", opt.Mix)
	}
	if opt.Mode == "closed" && opt.Users < 1 {
		return usagef("--users %d: want at least 1", opt.Users)
	}
	if opt.Mode == "open" && !(opt.Rate > 0) {
		return usagef("--rate %g: want a positive rate", opt.Rate)
	}
	if opt.Duration < 0 {
		return usagef("--duration %v: must not be negative", opt.Duration)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	opt.Classes = cfg.Classes()
	opt.Progress = e.stderr
	stats, err := load.Run(e.ctx, opt)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(stats, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", out)
	return err
}
