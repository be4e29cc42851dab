package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/ocp"
)

func init() {
	register("ocp", "Online Charging Processor: rating and quota, stateless, calls the ABM", runOCP)
}

type ocpFlags struct {
	listen, discovery, k8sNamespace, network, logLevel string
	abm, tariff                                        string
	pprof                                              string
	maxInFlight                                        int
	checkFlags                                         bool
}

func runOCP(args []string) error {
	var f ocpFlags
	fs := flag.NewFlagSet("ocp", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8081", "host:port serving the OCP API (POST "+ocp.ChargePath+", msgp), /healthz, /readyz and /metrics")
	fs.StringVar(&f.discovery, "discovery", chassis.DiscoveryStatic,
		"how to find the ABM: static (--abm is a comma-separated host:port list), dns (--abm is host:port of a headless service) or kubernetes (--abm is service[:port])")
	fs.StringVar(&f.k8sNamespace, "k8s-namespace", "", "Kubernetes namespace for --discovery=kubernetes (env also POD_NAMESPACE)")
	fs.StringVar(&f.network, "network", "", "Multus network whose addresses to use for peers; empty = the pod IP")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.abm, "abm", "127.0.0.1:8082", "the ABM peer, in the form --discovery wants")
	fs.StringVar(&f.tariff, "tariff", "", "tariff file (YAML or JSON: rating group → service, price, grant, validity); empty = the built-in default (ocp/README.md)")
	fs.IntVar(&f.maxInFlight, "max-inflight", 4096, "requests served at once; beyond it requests get 503 at once")
	fs.StringVar(&f.pprof, "pprof", "", "host:port to serve net/http/pprof on (profiling); empty = off")
	fs.BoolVar(&f.checkFlags, "check-flags", false, "parse and validate flags, environment and the tariff, print the resolved configuration and exit without starting")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf ocp [flags]\n\nRuns the Online Charging Processor. Every flag also reads CHF_<FLAG> (upper case, '-' → '_')\nfrom the environment when not given.\n\nflags:\n")
		fs.PrintDefaults()
	}
	tracing := chassis.TelemetryFlags(fs)
	batch, checkBatch := batchFlags(fs, "abm")
	level, err := parseServiceFlags(fs, args, &f.listen, &f.logLevel)
	if err != nil {
		return err
	}
	if f.maxInFlight <= 0 {
		return fmt.Errorf("cannot use --max-inflight %d: must be positive", f.maxInFlight)
	}
	tariff, err := ocp.LoadTariff(f.tariff)
	if err != nil {
		return err
	}
	src, err := chassis.PeerSource(f.discovery, f.abm, chassis.WithNamespace(f.k8sNamespace), chassis.WithNetwork(f.network))
	if err != nil {
		return fmt.Errorf("cannot use --abm: %w", err)
	}
	if err := checkTracing(tracing); err != nil {
		return err
	}
	if err := checkBatch(); err != nil {
		return err
	}
	if f.checkFlags {
		fmt.Printf("listen=%s discovery=%s k8s-namespace=%s network=%s log-level=%s abm=%s tariff=%s rating-groups=%d max-inflight=%d pprof=%s batch-inflight=%d batch-max=%d\n",
			f.listen, f.discovery, f.k8sNamespace, f.network, level, f.abm, f.tariff, len(tariff.RatingGroups), f.maxInFlight, f.pprof, batch.MaxInFlight, batch.MaxItems)
		return nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", "ocp")
	slog.SetDefault(log)
	stopTracing, err := startTracing(tracing, "ocp", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if f.pprof != "" {
		if _, _, err := chassis.StartPprof(f.pprof, log); err != nil {
			return err
		}
	}

	client, err := chassis.NewClient(chassis.ClientConfig{
		Peer: "abm", Source: src, Logger: log,
		// Only calls that never reached an ABM are retried: a repeated
		// event is charged once but answered with Charged = 0, which would
		// hide the debit from the front's X-Chf-Charged reconciliation.
	})
	if err != nil {
		return fmt.Errorf("cannot create ABM client: %w", err)
	}
	defer client.Close()
	proc := ocp.NewProcessor(tariff, abm.NewClient(client, *batch))
	srv, err := chassis.NewServer(chassis.ServerConfig{
		Service: "ocp", Listen: f.listen, Handler: ocp.Handler(proc), MaxInFlight: f.maxInFlight, Logger: log,
		Ready: func(ctx context.Context) error {
			if len(client.Endpoints()) == 0 {
				return fmt.Errorf("no ABM endpoint known")
			}
			return nil
		},
	})
	if err != nil {
		return fmt.Errorf("cannot create OCP server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return err
	}
	log.Info("serving", "addr", srv.Addr(), "abm", f.abm, "tariff", f.tariff)
	awaitStopSignal(log)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("cannot stop OCP server: %w", err)
	}
	return nil
}
