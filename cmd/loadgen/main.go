// Command loadgen drives charging load against a CHF and reports
// throughput, latency, jitter, CPU and a balance audit.
//
//	loadgen run     --target http://HOST:PORT[,...] [flags]   one measured run
//	loadgen local   [--duration 30s] [--rate N] [--json FILE]  start `chf local`, run, report, stop
//	loadgen sweep   (--target URL | --local) [--start --step --max --slo-p99]  find the knee
//	loadgen compare A.json B.json ... [--labels] [--baseline LABEL|N]  side-by-side table
//	loadgen gate    --baseline-chf A --candidate-chf B | --baseline-files ... --candidate-files ...
//	loadgen merge   -o OUT.json IN.json...                    combine shard results
//	loadgen check-money [--seed N] [--duration D] [--faults on|off|LIST]  model-based money checker under faults
//	loadgen --version
//
// As in cmd/chf, each command's configuration is a type (RunConfig,
// LocalConfig, SweepConfig, GateConfig, LabConfig, CheckMoneyConfig) that
// starts from its Default value, registers its flags (RegisterFlags) and
// checks them (Validate: a usage error naming the flag) before anything
// starts; the command then starts, waits and stops in named steps. The
// run flags that run, local, sweep and gate share are runFlags, the local
// CHF's localFlags; --cgw-args, --ocp-args and --abm-args are read with
// the flag package's syntax (serviceArgs).
//
// Exit codes: 0 success; 1 error; 2 usage; 3 the balance audit (or
// check-money) failed;
// gate: 4 regression, 5 unmeasurable; 6 a threshold failed; 130 / 143
// interrupted by SIGINT / SIGTERM (the report is still written).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"

	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// version is set by the build: -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitError     = 1
	exitUsage     = 2
	exitAudit     = 3
	exitThreshold = 6
)

// exitCodes is the usage text's line on exit codes.
const exitCodes = "Exit codes: 0 success, 1 error, 2 usage, 3 balance audit failed, 6 a threshold failed (--threshold);\n" +
	"gate: 4 regression, 5 unmeasurable; 130 / 143 interrupted by SIGINT / SIGTERM (the report is still written).\n"

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

func usage(w io.Writer) {
	fmt.Fprintf(w, "loadgen: charging load generator for a CHF (throughput, latency, jitter, CPU, balance audit)\n\n"+
		"usage: loadgen <command> [flags]\n       loadgen --version\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'loadgen <command> --help' for the flags of a command.\n"+exitCodes)
}

// versionString is what --version prints.
func versionString() string {
	return fmt.Sprintf("loadgen %s (%s, %s/%s)", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// usageError marks errors that should exit with exitUsage.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

// dispatch runs the command of args and returns the exit code.
func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Println(versionString())
		return 0
	case freeze.Command: // not listed: the child a run starts (--host-probe)
		return serveFreezeProbe()
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "loadgen: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return exitUsage
	}
	err := cmd.run(args[1:])
	code := exitCode(err)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", args[0], err)
		if code == exitUsage {
			fmt.Fprintf(os.Stderr, "Run 'loadgen %s --help' for its flags.\n", args[0])
		}
	}
	return code
}

// exitCode maps a command's error to the exit code: an interruption
// first (130/143), then usage, gate verdicts, the audit, thresholds, and
// 1 for anything else.
func exitCode(err error) int {
	var ie interrupted
	var ue usageError
	var ge gateExit
	var cf checkFailed
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ie):
		return ie.code()
	case errors.As(err, &ue), errors.Is(err, scenario.ErrInvalid):
		return exitUsage
	case errors.As(err, &ge):
		return ge.code
	case errors.Is(err, run.ErrCPU):
		return exitError
	case errors.Is(err, run.ErrAudit), errors.As(err, &cf):
		return exitAudit
	case errors.Is(err, run.ErrThresholds):
		return exitThreshold
	}
	return exitError
}

// newLogger returns a text logger on stderr at level.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
