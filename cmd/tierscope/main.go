// Command tierscope runs Tierscope's performance-model algorithms over files.
// docs/formats.md is its contract: every command reads --in (or standard input with
// "--in -"), writes --out (or standard output), and exits 0 on success, 1 on bad
// input and 2 on bad usage, with one error line on standard error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Exit codes of the command-line contract.
const (
	exitOK         = 0
	exitBadInput   = 1
	exitBadUsage   = 2
	programName    = "tierscope"
	usageHeadline  = "usage: tierscope <command> [flags]"
	commandSummary = `commands:
  paths      infer causal path patterns from a message trace (docs/formats.md §2)
  maketrace  generate a message trace from tracelets (docs/formats.md §3)
  convert    convert a trace dataset (Nezha CSV) to OTLP/JSON lines (docs/formats.md §4)
  stitch     infer lost parents of OTLP spans and tag their causal paths (docs/formats.md §4)
  summary    print the costliest causal paths and the service graph of OTLP spans
  inject     start, inspect, renew or stop a perturbation lease on an injector
  experiment start, follow or abort a gradient experiment of the perfmodel exporter
  models     print the perfmodel exporter's work factors, signatures, gradients and a what-if
  workfactor estimate the CPU work factor of each request flow (docs/formats.md §5)
  signature  compute or compare application signatures (docs/formats.md §6)
  gradient   plan (train) or measure a spectral resource gradient (docs/formats.md §7)
  predict    predict response times after changes from gradients (docs/formats.md §7)

Run 'tierscope <command> -h' for the flags of a command.`
)

// usageError is a mistake in the command line; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	name string
	run  func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = []command{
	{"paths", runPaths},
	{"maketrace", runMaketrace},
	{"convert", runConvert},
	{"stitch", runStitch},
	{"summary", runSummary},
	{"inject", runInject},
	{"experiment", runExperiment},
	{"models", runModels},
	{"workfactor", runWorkfactor},
	{"signature", runSignature},
	{"gradient", runGradient},
	{"predict", runPredict},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, usageHeadline)
		fmt.Fprintln(stderr, commandSummary)
		if len(args) == 0 {
			return exitBadUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdin, stdout, stderr)
		var ue usageError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, errHelp):
			return exitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "%s %s: %v\n", programName, c.name, err)
			return exitBadUsage
		default:
			fmt.Fprintf(stderr, "%s %s: %v\n", programName, c.name, err)
			return exitBadInput
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n%s\n", programName, args[0], commandSummary)
	return exitBadUsage
}
