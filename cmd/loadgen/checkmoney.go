package main

import (
	"errors"
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

func checkMoneyCmd(args []string) error {
	fs := newFlagSet("check-money")
	seed := fs.Uint64("seed", 0, "seed of every random choice (operations and faults); 0 = a random one, printed")
	ops := fs.Int("ops", 0, "stop after this many operations; 0 = only --duration")
	duration := fs.Duration("duration", 30*time.Second, "how long to send operations (then the run quiesces and checks the final balances)")
	accounts := fs.Int("accounts", 4, "accounts the operations go to, 1..64 (few, so that operations collide); every fourth is postpaid")
	balance := fs.Int64("balance", 1000, "initial balance of each account, minor units (small, so that accounts run dry)")
	faults := fs.String("faults", "on", "faults to inject: on (kill -9 and SIGSTOP of cgw, ocp, abm, aslite), off, or a list of kill, stop, SERVICE or ACTION:SERVICE (e.g. kill:aslite,stop:cgw)")
	interval := fs.Duration("fault-interval", 2*time.Second, "mean time between faults (one at a time)")
	rate := fs.Float64("rate", 100, "operations per second at most, over all accounts (0 < rate <= 500)")
	avoid := fs.String("avoid", "", "known defects to keep out of the operation mix, comma-separated: "+strings.Join(moneycheck.Defects, ", ")+", or open (the ones still open: "+strings.Join(moneycheck.OpenDefects, ", ")+")")
	shrink := fs.Duration("shrink-time", 60*time.Second, "how long a failure may be shrunk to a minimal reproduction; negative = not at all")
	tariff := fs.String("tariff", "", "tariff file for the OCP and the model (rating groups 10 data, 20 voice, 30 sms); empty = the checker's own")
	workDir := fs.String("work-dir", "", "directory for aslite's data, the tariff and chf.log; empty = a temporary one (kept after a failure)")
	chfLogs := fs.Bool("chf-logs", false, "copy the services' logs to stderr (default: chf.log in the work directory)")
	chfBin := fs.String("chf", "", "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	cdrFlag := fs.String("cdr", "on", "on: the OCP writes CHF-CDRs and, at the end of a run without a mismatch, the CHF is stopped cleanly and each account's CDR charges (after the collector rule) must equal the model's debits (only not exceed them when an OCP was killed: its open records are lost); off: no CDRs")
	logLevel := fs.String("log-level", "warn", "log level of the checker: debug, info, warn or error")
	if err := parseFlags(fs, checkMoneyHelp, args); err != nil {
		return err
	}
	fl, err := moneycheck.ParseFaults(*faults)
	if err != nil {
		return usageError{fmt.Errorf("invalid --faults: %w", err)}
	}
	var avoided []string
	for _, a := range strings.Split(*avoid, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "open":
			avoided = append(avoided, moneycheck.OpenDefects...)
		default:
			if !contains(moneycheck.Defects, a) {
				return usageError{fmt.Errorf("invalid --avoid: unknown defect %q (want %s or open)", a, strings.Join(moneycheck.Defects, ", "))}
			}
			avoided = append(avoided, a)
		}
	}
	switch {
	case *cdrFlag != "on" && *cdrFlag != "off":
		return usageError{fmt.Errorf("invalid --cdr: %q, want on or off", *cdrFlag)}
	case *ops < 0:
		return usageError{errors.New("invalid --ops: must not be negative")}
	case *duration <= 0:
		return usageError{errors.New("invalid --duration: must be positive")}
	case *accounts < 1 || *accounts > 64:
		return usageError{fmt.Errorf("invalid --accounts: %d, want 1..64", *accounts)}
	case *balance <= 0:
		return usageError{errors.New("invalid --balance: must be positive")}
	case *rate <= 0 || *rate > 500:
		return usageError{fmt.Errorf("invalid --rate: %g, want 0 < rate <= 500", *rate)}
	case *interval < 100*time.Millisecond:
		return usageError{fmt.Errorf("invalid --fault-interval: %v, want at least 100ms", *interval)}
	}
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	if *seed == 0 {
		*seed = moneycheck.NewSeed()
	}
	fmt.Printf("check-money: seed %d (rerun with --seed %d)\n", *seed, *seed)
	sig := onSignals()
	defer sig.Stop()
	ctx := sig.Context()
	bin, cleanup, err := testbed.FindCHF(ctx, *chfBin, log)
	if err != nil {
		return err
	}
	if cleanup != nil {
		defer cleanup()
	}
	cfg := moneycheck.Config{
		CHF: bin, Seed: *seed, Ops: *ops, Duration: *duration, Accounts: *accounts, Balance: *balance,
		Faults: fl, FaultInterval: *interval, Rate: *rate, Avoid: avoided, ShrinkTime: *shrink,
		Tariff: *tariff, WorkDir: *workDir, NoCDR: *cdrFlag == "off", Progress: os.Stderr, Logger: log,
	}
	if *chfLogs {
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
