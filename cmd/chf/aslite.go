package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/abm/aslite"
)

func init() {
	register("aslite", "in-memory Aerospike-protocol store (single node) for the ABM", runAslite)
}

func runAslite(args []string) error {
	fs := flag.NewFlagSet("aslite", flag.ContinueOnError)
	listen := fs.String("listen", asliteEnv("CHF_LISTEN", "127.0.0.1:3000"),
		"host:port to serve the Aerospike wire protocol on (env CHF_LISTEN)")
	namespaces := fs.String("namespace", asliteEnv("CHF_NAMESPACE", "chf"),
		"comma-separated namespaces to serve, each 1 to 31 bytes (env CHF_NAMESPACE)")
	defaultTTL := fs.Duration("default-ttl", 0,
		"namespace default TTL for writes that ask for it; 0 = never expire")
	reclaim := fs.Duration("reclaim-interval", 5*time.Second,
		"how often expired records are deleted and their memory reclaimed")
	logLevel := fs.String("log-level", asliteEnv("CHF_LOG_LEVEL", "info"),
		"log level: debug, info, warn or error (env CHF_LOG_LEVEL)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf aslite [flags]\n\n"+
			"Serves an in-memory, single-node store speaking the Aerospike wire protocol,\n"+
			"for the official Go client (aerospike-client-go/v7). Data is lost on exit.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cannot parse flags: unexpected argument %q", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("cannot parse --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var nsList []string
	for _, n := range strings.Split(*namespaces, ",") {
		if n = strings.TrimSpace(n); n != "" {
			nsList = append(nsList, n)
		}
	}
	srv, err := aslite.New(aslite.Config{
		Namespaces:      nsList,
		Logger:          log,
		DefaultTTL:      *defaultTTL,
		ReclaimInterval: *reclaim,
	})
	if err != nil {
		return fmt.Errorf("cannot configure aslite: %w", err)
	}
	if err := srv.Start(*listen); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	signal.Stop(sig)
	log.Info("aslite stopping", "signal", got.String())
	if err := srv.Close(); err != nil {
		return fmt.Errorf("cannot stop aslite: %w", err)
	}
	return nil
}

// asliteEnv returns the environment variable name, or def when it is unset.
func asliteEnv(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
