package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/local"
)

func init() {
	register("local", "run aslite, abm, ocp and cgw as local processes with provisioned accounts", runLocal)
}

func runLocal(args []string) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	nchf := fs.String("nchf", local.DefaultNchf, "host:port of the CGW (Nchf over h2c and HTTP/1.1, balance inquiry); port 0 = any free port")
	diameter := fs.String("diameter", "", "host:port for the CGW's Diameter Gy front; empty = off")
	accounts := fs.Int("accounts", local.DefaultAccounts, "accounts to provision, from --first upward")
	balance := fs.Int64("balance", local.DefaultBalance, "balance of each provisioned account, in minor units")
	first := fs.String("first", local.DefaultFirst, "first SUPI to provision")
	ocpAddr := fs.String("ocp", "", "host:port for the OCP; empty = a free loopback port")
	abmAddr := fs.String("abm", "", "host:port for the ABM; empty = a free loopback port")
	asAddr := fs.String("aerospike", "", "host:port for aslite; empty = a free loopback port")
	cgwArgs := fs.String("cgw-args", "", "extra flags for the cgw process, space-separated (e.g. \"--pprof 127.0.0.1:6060\")")
	ocpArgs := fs.String("ocp-args", "", "extra flags for the ocp process, space-separated")
	abmArgs := fs.String("abm-args", "", "extra flags for the abm process, space-separated")
	quiet := fs.Bool("quiet", false, "do not copy the services' logs to stderr")
	logLevel := fs.String("log-level", "info", "log level of the runner: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf local [flags]\n\n"+
			"Starts aslite, abm, ocp and cgw as separate processes on loopback, provisions the\n"+
			"accounts, prints the Nchf and balance URLs once ready, and stops every process on\n"+
			"SIGINT/SIGTERM. Exits non-zero with the error of a service that dies early.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := chassis.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cannot parse flags: unexpected argument %q", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("cannot parse --log-level: %w", err)
	}
	if *accounts < 0 {
		return errors.New("cannot use --accounts: must not be negative")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", "local")
	cfg := local.Config{
		Nchf: *nchf, Diameter: *diameter, OCP: *ocpAddr, ABM: *abmAddr, Aerospike: *asAddr,
		Accounts: *accounts, Balance: *balance, First: *first, Logger: log,
		Args: map[string][]string{"cgw": strings.Fields(*cgwArgs), "ocp": strings.Fields(*ocpArgs), "abm": strings.Fields(*abmArgs)},
	}
	if *accounts == 0 {
		cfg.Accounts = -1
	}
	if *quiet {
		cfg.Logs = discard{}
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	chf, err := local.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if d := chf.Addrs["diameter"]; d != "" {
		fmt.Printf("chf local ready: nchf %s balance %s{supi} diameter %s pids %v\n", chf.NchfURL, chf.BalanceURL, d, chf.Pids())
	} else {
		fmt.Printf("chf local ready: nchf %s balance %s{supi} pids %v\n", chf.NchfURL, chf.BalanceURL, chf.Pids())
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
		start := time.Now()
		err := chf.Stop()
		log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
		return err
	case <-chf.Done():
		chf.Stop()
		return chf.Err()
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
