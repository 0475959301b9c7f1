// Command wfreplay runs the deterministic replay of paper 002 §5: it writes the
// samples of a run as a work-factor CSV (docs/formats.md §5), or runs every
// experiment of docs/workfactor-report.md and prints its tables.
//
//	wfreplay -report > tables.md
//	wfreplay -change-points
//	wfreplay -csv samples.csv [-scenario no-collinearity] [-seed 1] [-per-process] [-from 1 -to 60]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tierscope/tierscope/internal/sim/paperexp"
	"github.com/tierscope/tierscope/internal/workfactor"
)

func main() {
	report := flag.Bool("report", false, "run every experiment and print the report's tables (Markdown)")
	csvOut := flag.String("csv", "", "write the run's samples to this CSV file (- for standard output)")
	scenario := flag.String("scenario", "no-collinearity", "no-collinearity, collinearity-1 or collinearity-2")
	seed := flag.Uint64("seed", 1, "random seed")
	perProcess := flag.Bool("per-process", false, "write per-process readings (with the process column)")
	from := flag.Int("from", 1, "first period written")
	to := flag.Int("to", 0, "last period written (0 = the last)")
	changePoints := flag.Bool("change-points", false, "the replay on seeds 1–6 with each change point at an alarm (the columns of wfscenario -dev's table)")
	flag.Parse()
	if *changePoints {
		fmt.Println("| change point | machine: significant cells beaten | per process: cells beaten, tails within 15% |")
		fmt.Println("|---|---|---|")
		for _, v := range []struct {
			name string
			cp   workfactor.ChangePointMethod
		}{{"recent", workfactor.ChangePointRecent}, {"excursion", workfactor.ChangePointExcursion},
			{"mean-shift", workfactor.ChangePointMeanShift}, {"regression", workfactor.ChangePointRegression}} {
			cfg := workfactor.DefaultConfig()
			cfg.ChangePoint = v.cp
			mach, proc, tails, err := replaySeeds(cfg)
			if err != nil {
				fmt.Fprintln(os.Stderr, "wfreplay:", err)
				os.Exit(1)
			}
			fmt.Printf("| %s | %d/228 | %d/228, %d/60 |\n", v.name, mach, proc, tails)
		}
		return
	}
	if *report {
		if err := paperexp.WriteReport(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "wfreplay:", err)
			os.Exit(1)
		}
		return
	}
	if *csvOut == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg := paperexp.DefaultConfig()
	cfg.Seed = *seed
	switch *scenario {
	case "no-collinearity":
	case "collinearity-1":
		cfg.Scenario = paperexp.Collinearity1()
	case "collinearity-2":
		cfg.Scenario = paperexp.Collinearity2()
	default:
		fmt.Fprintf(os.Stderr, "wfreplay: unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	run, err := paperexp.Generate(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wfreplay:", err)
		os.Exit(1)
	}
	w := os.Stdout
	if *csvOut != "-" {
		f, err := os.Create(*csvOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wfreplay:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	if err := paperexp.WriteCSV(w, run, *perProcess, *from, *to); err != nil {
		fmt.Fprintln(os.Stderr, "wfreplay:", err)
		os.Exit(1)
	}
}

// replaySeeds runs the paper replay on seeds 1–6 with cfg, machine and
// per-process readings, and sums the verdicts.
func replaySeeds(cfg workfactor.Config) (mach, proc, tails int, err error) {
	results, err := paperexp.ReplaySeeds(paperexp.DefaultConfig(), paperexp.Seeds(1, 6), cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, r := range results {
		mach, proc, tails = mach+r.Machine[0].Beaten, proc+r.PerProcess[0].Beaten, tails+r.PerProcess[0].TailWithin
	}
	return mach, proc, tails, nil
}
