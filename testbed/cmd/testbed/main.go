// Command testbed runs the testbed's tiers (all in one process with `up`, or one
// tier per process), its load generator and prints its ground truth; see
// testbed/README.md. Exit codes: 0 success, 1 runtime failure, 2 bad usage, with
// one error line on standard error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const (
	exitOK       = 0
	exitFailure  = 1
	exitBadUsage = 2
	usageHead    = "usage: testbed <command> [flags]"
	commandList  = `commands:
  up      run every tier in this process on loopback ports
  web     run the web tier
  app     run one app replica
  db      run a db (primary with --backup, else backup or standalone)
  queue   run the message queue
  worker  run the queue worker
  load    drive the web tier with TPC-W-style sessions
  truth   print the configuration's ground truth as JSON

Run 'testbed <command> -h' for the flags of a command.`
)

// usageError is a mistake in the command line; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errHelp: -h was asked for and the usage printed.
var errHelp = errors.New("help requested")

type env struct {
	ctx    context.Context // done on SIGINT/SIGTERM
	stdout io.Writer
	stderr io.Writer
}

var commands = map[string]func(e env, args []string) error{
	"up":     runUp,
	"web":    runWeb,
	"app":    runApp,
	"db":     runDB,
	"queue":  runQueue,
	"worker": runWorker,
	"load":   runLoad,
	"truth":  runTruth,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, usageHead)
		fmt.Fprintln(stderr, commandList)
		if len(args) == 0 {
			return exitBadUsage
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "testbed: unknown command %q\n%s\n", args[0], commandList)
		return exitBadUsage
	}
	err := cmd(env{ctx: ctx, stdout: stdout, stderr: stderr}, args[1:])
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "testbed %s: %v\n", args[0], err)
		return exitBadUsage
	default:
		fmt.Fprintf(stderr, "testbed %s: %v\n", args[0], err)
		return exitFailure
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	fs.Usage = func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: testbed %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; -h is errHelp, anything else wrong a usage error.
// required names flags that must be non-empty.
func parseFlags(fs *flag.FlagSet, args []string, required ...string) error {
	fs.SetOutput(io.Discard) // we print our own one-line error
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	for _, name := range required {
		if f := fs.Lookup(name); f != nil && f.Value.String() == "" {
			return usagef("--%s is required", name)
		}
	}
	return nil
}
