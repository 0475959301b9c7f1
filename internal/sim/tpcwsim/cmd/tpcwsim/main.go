// Command tpcwsim writes the monitoring windows (docs/formats.md §6) of one run of
// the paper 004 case-study replay. testdata/signature/ was made with it:
//
//	go run ./internal/sim/tpcwsim/cmd/tpcwsim --workload I --seed 1 --out testdata/signature/tpcw-v1-mix1.csv
//	go run ./internal/sim/tpcwsim/cmd/tpcwsim --workload II --seed 2 --home-extra-ms 2 --out testdata/signature/tpcw-v2-home+2ms-mix2.csv
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/tierscope/tierscope/internal/signature"
	"github.com/tierscope/tierscope/internal/sim/tpcwsim"
)

func main() {
	var (
		workload = flag.String("workload", "I", "workload of paper 004 Table III: I, II, III, or heavy")
		seed     = flag.Uint64("seed", 1, "random seed")
		extra    = flag.Float64("home-extra-ms", 0, "CPU time added to Home (a new version)")
		version  = flag.String("version", "", "version label (default v1, or v2-home+Nms with --home-extra-ms)")
		duration = flag.Duration("duration", 0, "length of the run (default 3h)")
		lock     = flag.Int("lock-capacity", -1, "slots of Execute Search's critical section (default 3; 0 = none)")
		out      = flag.String("out", "", "output CSV (default standard output)")
	)
	flag.Parse()
	var w tpcwsim.Workload
	switch *workload {
	case "I":
		w = tpcwsim.MixI
	case "II":
		w = tpcwsim.MixII
	case "III":
		w = tpcwsim.MixIII
	case "heavy":
		w = tpcwsim.MixHeavy
	default:
		fmt.Fprintf(os.Stderr, "tpcwsim: unknown workload %q (I, II, III or heavy)\n", *workload)
		os.Exit(2)
	}
	cfg := tpcwsim.DefaultConfig(w, *seed)
	cfg.Version = tpcwsim.VersionName(*extra)
	if *version != "" {
		cfg.Version = *version
	}
	if *extra != 0 {
		cfg.ExtraMs = map[string]float64{"Home": *extra}
	}
	if *duration > 0 {
		cfg.Duration = *duration
	}
	if *lock >= 0 {
		cfg.LockCapacity = *lock
	}
	res := tpcwsim.Run(cfg)
	f := os.Stdout
	if *out != "" {
		var err error
		if f, err = os.Create(*out); err != nil {
			fmt.Fprintln(os.Stderr, "tpcwsim:", err)
			os.Exit(1)
		}
	}
	bw := bufio.NewWriter(f)
	if err := signature.WriteCSV(bw, res.Rows); err != nil {
		fmt.Fprintln(os.Stderr, "tpcwsim:", err)
		os.Exit(1)
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "tpcwsim:", err)
		os.Exit(1)
	}
	if f != os.Stdout {
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "tpcwsim:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "tpcwsim: %s %s: %d requests, %d rows, front utilization %.3f–%.3f\n", w.Name, cfg.Version,
		res.Requests, len(res.Rows), slices.Min(res.FrontUtil), slices.Max(res.FrontUtil))
}
