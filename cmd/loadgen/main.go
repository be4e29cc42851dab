// Command loadgen drives charging load against a CHF and reports
// throughput, latency, jitter, CPU and a balance audit.
//
//	loadgen run     --target http://HOST:PORT[,...] [flags]   one measured run
//	loadgen local   [--duration 30s] [--rate N] [--json FILE]  start `chf local`, run, report, stop
//	loadgen sweep   (--target URL | --local) [--start --step --max --slo-p99]  find the knee
//	loadgen compare A.json B.json ... [--labels] [--baseline N]  side-by-side table
//	loadgen gate    --baseline-chf A --candidate-chf B | --baseline-files ... --candidate-files ...
//	loadgen merge   -o OUT.json IN.json...                    combine shard results
//
// Exit codes: 0 success; 1 error; 2 usage; 3 the balance audit failed;
// gate: 4 regression, 5 unmeasurable.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/chf-testbed/testbed/loadgen/run"
)

// Exit codes.
const (
	exitError = 1
	exitUsage = 2
	exitAudit = 3
)

type command struct {
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

// register adds a subcommand; each subcommand's file calls it from init.
func register(name, summary string, fn func(args []string) error) {
	if _, ok := commands[name]; ok {
		panic("BUG: subcommand registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: fn}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: loadgen <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'loadgen <command> --help' for the flags of a command.\n"+
		"Exit codes: 0 success, 1 error, 2 usage, 3 balance audit failed; gate: 4 regression, 5 unmeasurable.\n")
}

// usageError marks errors that should exit with exitUsage.
type usageError struct{ error }

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(exitUsage)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "loadgen: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(exitUsage)
	}
	err := cmd.run(os.Args[2:])
	var ue usageError
	var ge gateExit
	switch {
	case err == nil:
	case errors.As(err, &ge):
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(ge.code)
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(exitUsage)
	case errors.Is(err, run.ErrAudit):
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(exitAudit)
	default:
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(exitError)
	}
}

// newLogger returns a text logger on stderr at level.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("cannot parse --log-level %q: %w", level, err)}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
