// Command wfreplay runs the deterministic replay of paper 002 §5: it writes the
// samples of a run as a work-factor CSV (docs/formats.md §5), or runs every
// experiment of docs/workfactor-report.md and prints its tables.
//
//	wfreplay -report > tables.md
//	wfreplay -csv samples.csv [-scenario no-collinearity] [-seed 1] [-per-process] [-from 1 -to 60]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tierscope/tierscope/internal/sim/paperexp"
)

func main() {
	report := flag.Bool("report", false, "run every experiment and print the report's tables (Markdown)")
	csvOut := flag.String("csv", "", "write the run's samples to this CSV file (- for standard output)")
	scenario := flag.String("scenario", "no-collinearity", "no-collinearity, collinearity-1 or collinearity-2")
	seed := flag.Uint64("seed", 1, "random seed")
	perProcess := flag.Bool("per-process", false, "write per-process readings (with the process column)")
	from := flag.Int("from", 1, "first period written")
	to := flag.Int("to", 0, "last period written (0 = the last)")
	flag.Parse()
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
