package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/chassis"
)

func init() {
	register("provision", "create subscriber accounts with a balance on Aerospike (or aslite)", runProvision)
}

func runProvision(args []string) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	aerospike := fs.String("aerospike", "127.0.0.1:3000", "Aerospike seed nodes, comma-separated host:port (aslite or a real cluster)")
	namespace := fs.String("as-namespace", "chf", "Aerospike namespace of the account records (set \"accounts\", key = SUPI)")
	accounts := fs.Int("accounts", 100000, "number of accounts to create, from --first upward")
	balance := fs.Int64("balance", 100000000, "balance of each account in minor units (100000000 = 1,000,000.00)")
	first := fs.String("first", "imsi-001010000000001", "first SUPI (imsi- and up to 15 digits; the next ones count up)")
	currency := fs.String("currency", "EUR", "ISO 4217 currency of the accounts")
	overwrite := fs.Bool("overwrite", false, "replace existing accounts (balance reset, sessions dropped); default: leave them alone and count them as skipped")
	workers := fs.Int("workers", 16, "parallel writers")
	batch := fs.Int("batch", 256, "accounts per batch write request (1 = one request per account)")
	quiet := fs.Bool("quiet", false, "no progress lines, only the summary")
	checkFlags := fs.Bool("check-flags", false, "parse and validate flags and environment, print the resolved configuration and exit without writing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf provision [flags]\n\nCreates accounts imsi-…001 upward with a balance. Every flag also reads CHF_<FLAG>\n(upper case, '-' → '_') from the environment when not given.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := chassis.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cannot parse flags: unexpected argument %q", fs.Arg(0))
	}
	hosts, err := aerospikeHosts(*aerospike)
	if err != nil {
		return err
	}
	if *accounts < 0 || *balance < 0 || *workers <= 0 || *batch <= 0 {
		return errors.New("cannot use --accounts, --balance, --workers: must not be negative (workers positive)")
	}
	if len(*currency) != 3 {
		return fmt.Errorf("cannot use --currency %q: want a 3-letter ISO 4217 code", *currency)
	}
	if *accounts > 0 {
		if _, err := abm.SUPI(*first, *accounts-1); err != nil {
			return fmt.Errorf("cannot use --first/--accounts: %w", err)
		}
	}
	if *checkFlags {
		fmt.Printf("aerospike=%s as-namespace=%s accounts=%d balance=%d first=%s currency=%s overwrite=%v workers=%d batch=%d\n",
			*aerospike, *namespace, *accounts, *balance, *first, *currency, *overwrite, *workers, *batch)
		return nil
	}
	cl, err := dialAerospike(hosts)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var progress func(done, total int)
	if !*quiet {
		progress = func(done, total int) {
			el := time.Since(start).Seconds()
			fmt.Fprintf(os.Stderr, "\rprovisioned %d/%d accounts (%.0f%%, %.0f/s)", done, total, 100*float64(done)/float64(max(total, 1)), float64(done)/max(el, 1e-9))
		}
	}
	res, err := abm.Provision(ctx, cl, abm.ProvisionConfig{
		Namespace: *namespace, First: *first, Count: *accounts, Balance: *balance,
		Currency: *currency, Overwrite: *overwrite, Workers: *workers, Batch: *batch,
	}, progress)
	if progress != nil {
		fmt.Fprintln(os.Stderr)
	}
	el := time.Since(start)
	fmt.Printf("provisioned %d accounts (%d created, %d already there) from %s with %d minor units %s in %s (%.0f accounts/s)\n",
		res.Created+res.Skipped, res.Created, res.Skipped, *first, *balance, *currency, el.Round(time.Millisecond), float64(res.Created+res.Skipped)/el.Seconds())
	return err
}
