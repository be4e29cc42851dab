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
	"github.com/chf-testbed/testbed/chassis"
)

func init() {
	register("aslite", "in-memory Aerospike-protocol store (single node) for the ABM", runAslite)
}

func runAslite(args []string) error {
	fs := flag.NewFlagSet("aslite", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:3000",
		"host:port to serve the Aerospike wire protocol on")
	namespaces := fs.String("namespace", "chf",
		"comma-separated namespaces to serve, each 1 to 31 bytes")
	defaultTTL := fs.Duration("default-ttl", 0,
		"namespace default TTL for writes that ask for it (TTL 0); 0 = never expire")
	reclaim := fs.Duration("reclaim-interval", 5*time.Second,
		"how often expired records are deleted and their memory reclaimed")
	logLevel := fs.String("log-level", "info",
		"log level: debug, info, warn or error")
	pprofAddr := fs.String("pprof", "",
		"host:port to serve net/http/pprof on (profiling); empty = off")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf aslite [flags]\n\n"+
			"Serves an in-memory, single-node store speaking the Aerospike wire protocol,\n"+
			"for the official Go client (aerospike-client-go/v7). Data is lost on exit.\n"+
			"Every flag not given reads CHF_<FLAG> from the environment (CHF_LISTEN, ...).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := asliteEnvFlags(fs); err != nil {
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
	if *pprofAddr != "" {
		if _, _, err := chassis.StartPprof(*pprofAddr, log); err != nil {
			return err
		}
	}
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

// asliteEnvFlags sets every flag not given on the command line from the
// environment variable CHF_<FLAG NAME UPPERCASED, '-' -> '_'>, as the
// chassis does for the services.
func asliteEnvFlags(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "CHF_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("cannot parse %s: %w", env, e)
			}
		}
	})
	return err
}
