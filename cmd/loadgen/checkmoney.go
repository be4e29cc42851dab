package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/moneycheck"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("check-money", "model-based money checker: random operations and faults (kill -9, SIGSTOP) against local services, every balance checked against a model", checkMoneyCmd)
}

var checkMoneyHelp = help{
	name:     "check-money",
	synopsis: "loadgen check-money [--seed N] [--duration 30s] [--ops N] [--accounts 4] [--faults on|off|LIST] [--cdr on|off] [--chf PATH]",
	text: "Starts aslite (--data-dir, --commit sync), abm, ocp and cgw as separate processes, provisions a few\n" +
		"accounts, sends random, seeded operations over Nchf (h2c and HTTP/1.1) and the operator API\n" +
		"(creates, updates, releases, IEC and PEC events, top-ups and buckets, balance reads,\n" +
		"retransmissions, duplicated, reordered and parallel requests, aborts) while it kills (-9) and\n" +
		"stops (SIGSTOP/SIGCONT) the services, and checks every answer and every account's balance,\n" +
		"reservations, debits, overage, offline total, credits and buckets against an independent model\n" +
		"(loadgen/moneycheck/README.md). Lost answers are retried with the same identity until definite.\n" +
		"At the end (--cdr on) it stops the CHF cleanly and checks each account's CHF-CDR charges against\n" +
		"the model's debits.\n" +
		"Success prints the operations, faults, seed and `mismatches: 0`. A mismatch prints the seed, the\n" +
		"failing account's history and a shrunk reproduction, and exits 3. SIGINT stops every process.",
}

// CheckMoneyConfig is the configuration of loadgen check-money; Validate
// resolves the faults and the avoided defects.
type CheckMoneyConfig struct {
	seed                       uint64
	ops, accounts              int
	duration, interval, shrink time.Duration
	balance                    int64
	faults, avoid, cdr         string
	rate                       float64
	tariff, workDir, chf       string
	chfLogs                    bool
	logLevel                   string

	// Resolved by Validate.
	faultList []moneycheck.Fault
	avoided   []string
}

// DefaultCheckMoneyConfig returns loadgen check-money's defaults.
func DefaultCheckMoneyConfig() CheckMoneyConfig {
	return CheckMoneyConfig{
		duration: 30 * time.Second, accounts: 4, balance: 1000, faults: "on", interval: 2 * time.Second,
		rate: 100, shrink: 60 * time.Second, cdr: "on", logLevel: "warn",
	}
}

// RegisterFlags registers check-money's flags on fs, c's values as the
// defaults.
func (c *CheckMoneyConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.Uint64Var(&c.seed, "seed", c.seed, "seed of every random choice (operations and faults); 0 = a random one, printed")
	fs.IntVar(&c.ops, "ops", c.ops, "stop after this many operations; 0 = only --duration")
	fs.DurationVar(&c.duration, "duration", c.duration, "how long to send operations (then the run quiesces and checks the final balances)")
	fs.IntVar(&c.accounts, "accounts", c.accounts, "accounts the operations go to, 1..64 (few, so that operations collide); every fourth is postpaid")
	fs.Int64Var(&c.balance, "balance", c.balance, "initial balance of each account, minor units (small, so that accounts run dry)")
	fs.StringVar(&c.faults, "faults", c.faults, "faults to inject: on (kill -9 and SIGSTOP of cgw, ocp, abm, aslite), off, or a list of kill, stop, SERVICE or ACTION:SERVICE (e.g. kill:aslite,stop:cgw)")
	fs.DurationVar(&c.interval, "fault-interval", c.interval, "mean time between faults (one at a time)")
	fs.Float64Var(&c.rate, "rate", c.rate, "operations per second at most, over all accounts (0 < rate <= 500)")
	fs.StringVar(&c.avoid, "avoid", c.avoid, "known defects to keep out of the operation mix, comma-separated: "+strings.Join(moneycheck.Defects, ", ")+", or open (the ones still open: "+strings.Join(moneycheck.OpenDefects, ", ")+")")
	fs.DurationVar(&c.shrink, "shrink-time", c.shrink, "how long a failure may be shrunk to a minimal reproduction; negative = not at all")
	fs.StringVar(&c.tariff, "tariff", c.tariff, "tariff file for the OCP and the model (rating groups 10 data, 20 voice, 30 sms); empty = the checker's own")
	fs.StringVar(&c.workDir, "work-dir", c.workDir, "directory for aslite's data, the tariff and chf.log; empty = a temporary one (kept after a failure)")
	fs.BoolVar(&c.chfLogs, "chf-logs", c.chfLogs, "copy the services' logs to stderr (default: chf.log in the work directory)")
	fs.StringVar(&c.chf, "chf", c.chf, "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	fs.StringVar(&c.cdr, "cdr", c.cdr, "on: the OCP writes CHF-CDRs and, at the end of a run without a mismatch, the CHF is stopped cleanly and each account's CDR charges (after the collector rule) must equal the model's debits (only not exceed them when an OCP was killed: its open records are lost); off: no CDRs")
	fs.StringVar(&c.logLevel, "log-level", c.logLevel, "log level of the checker: debug, info, warn or error")
}

// Validate checks the parsed flags (a usage error naming the flag).
func (c *CheckMoneyConfig) Validate() error {
	var err error
	if c.faultList, err = moneycheck.ParseFaults(c.faults); err != nil {
		return usageError{fmt.Errorf("invalid --faults: %w", err)}
	}
	c.avoided = nil
	for _, a := range strings.Split(c.avoid, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "open":
			c.avoided = append(c.avoided, moneycheck.OpenDefects...)
		default:
			if !contains(moneycheck.Defects, a) {
				return usageError{fmt.Errorf("invalid --avoid: unknown defect %q (want %s or open)", a, strings.Join(moneycheck.Defects, ", "))}
			}
			c.avoided = append(c.avoided, a)
		}
	}
	switch {
	case c.cdr != "on" && c.cdr != "off":
		return usageError{fmt.Errorf("invalid --cdr: %q, want on or off", c.cdr)}
	case c.ops < 0:
		return usageError{errors.New("invalid --ops: must not be negative")}
	case c.duration <= 0:
		return usageError{errors.New("invalid --duration: must be positive")}
	case c.accounts < 1 || c.accounts > 64:
		return usageError{fmt.Errorf("invalid --accounts: %d, want 1..64", c.accounts)}
	case c.balance <= 0:
		return usageError{errors.New("invalid --balance: must be positive")}
	case c.rate <= 0 || c.rate > 500:
		return usageError{fmt.Errorf("invalid --rate: %g, want 0 < rate <= 500", c.rate)}
	case c.interval < 100*time.Millisecond:
		return usageError{fmt.Errorf("invalid --fault-interval: %v, want at least 100ms", c.interval)}
	}
	return nil
}

func checkMoneyCmd(args []string) error {
	c := DefaultCheckMoneyConfig()
	fs := newFlagSet("check-money")
	c.RegisterFlags(fs)
	if err := parseFlags(fs, checkMoneyHelp, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	log, err := newLogger(c.logLevel)
	if err != nil {
		return err
	}
	if c.seed == 0 {
		c.seed = moneycheck.NewSeed()
	}
	fmt.Printf("check-money: seed %d (rerun with --seed %d)\n", c.seed, c.seed)
	sig := onSignals()
	defer sig.Stop()
	ctx := sig.Context()
	bin, cleanup, err := testbed.FindCHF(ctx, c.chf, log)
	if err != nil {
		return err
	}
	if cleanup != nil {
		defer cleanup()
	}
	cfg := moneycheck.Config{
		CHF: bin, Seed: c.seed, Ops: c.ops, Duration: c.duration, Accounts: c.accounts, Balance: c.balance,
		Faults: c.faultList, FaultInterval: c.interval, Rate: c.rate, Avoid: c.avoided, ShrinkTime: c.shrink,
		Tariff: c.tariff, WorkDir: c.workDir, NoCDR: c.cdr == "off", Progress: os.Stderr, Logger: log,
	}
	if c.chfLogs {
		cfg.Logs = os.Stderr
	}
	res, err := moneycheck.Run(ctx, cfg)
	if res != nil {
		moneycheck.FormatResult(os.Stdout, res)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, moneycheck.ErrConfig):
		return usageError{err}
	case errors.Is(err, moneycheck.ErrMismatch):
		return checkFailed{err}
	}
	return sig.wrap(err)
}

// checkFailed is a mismatch found by check-money: exit 3, as a failed audit.
type checkFailed struct{ error }

func (e checkFailed) Unwrap() error { return e.error }
