package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

func init() {
	register("abm", "Account Balance Manager: balances, reservations and sessions on Aerospike", runABM)
}

type abmFlags struct {
	listen, discovery, k8sNamespace, network, logLevel string
	aerospike, namespace                               string
	pprof                                              string
	sweep                                              time.Duration
	maxInFlight, accountCache                          int
	checkFlags                                         bool
}

func runABM(args []string) error {
	var f abmFlags
	fs := flag.NewFlagSet("abm", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8082", "host:port serving the ABM API (POST "+abm.ApplyPath+", msgp), /healthz, /readyz and /metrics")
	fs.StringVar(&f.discovery, "discovery", chassis.DiscoveryStatic, "discovery mode of the service family (static, dns or kubernetes); the ABM calls no peer service, it is accepted for uniform Helm values")
	fs.StringVar(&f.k8sNamespace, "k8s-namespace", "", "Kubernetes namespace for --discovery=kubernetes (env also POD_NAMESPACE)")
	fs.StringVar(&f.network, "network", "", "Multus network whose addresses to use for peers; empty = the pod IP")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.aerospike, "aerospike", "127.0.0.1:3000", "Aerospike seed nodes, comma-separated host:port (aslite or a real cluster)")
	fs.StringVar(&f.namespace, "as-namespace", "chf", "Aerospike namespace of the account records (set \"accounts\", key = SUPI)")
	fs.DurationVar(&f.sweep, "reservation-sweep", time.Minute, "interval of the background scan releasing expired reservations and sessions; 0 = off (they are still released on the account's next access)")
	fs.IntVar(&f.maxInFlight, "max-inflight", 4096, "requests served at once; beyond it requests get 503 at once")
	fs.IntVar(&f.accountCache, "account-cache", 1<<16, "accounts whose last written state the ABM keeps to skip the read of their next charging event (writes stay generation-checked); 0 or negative = off, which is required when account records may be deleted and re-created while the ABM runs")
	fs.StringVar(&f.pprof, "pprof", "", "host:port to serve net/http/pprof on (profiling); empty = off")
	fs.BoolVar(&f.checkFlags, "check-flags", false, "parse and validate flags and environment, print the resolved configuration and exit without starting")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf abm [flags]\n\nRuns the Account Balance Manager. Every flag also reads CHF_<FLAG> (upper case, '-' → '_')\nfrom the environment when not given.\n\nflags:\n")
		fs.PrintDefaults()
	}
	tracing := chassis.TelemetryFlags(fs)
	level, err := parseServiceFlags(fs, args, &f.listen, &f.logLevel)
	if err != nil {
		return err
	}
	hosts, err := aerospikeHosts(f.aerospike)
	if err != nil {
		return err
	}
	if f.namespace == "" {
		return errors.New("cannot use --as-namespace: empty")
	}
	if f.sweep < 0 || f.maxInFlight <= 0 {
		return errors.New("cannot use --reservation-sweep / --max-inflight: must not be negative / must be positive")
	}
	switch f.discovery {
	case chassis.DiscoveryStatic, chassis.DiscoveryDNS, chassis.DiscoveryKubernetes:
	default:
		return fmt.Errorf("cannot use --discovery %q: %w", f.discovery, chassis.ErrUnknownDiscovery)
	}
	if err := checkTracing(tracing); err != nil {
		return err
	}
	if f.checkFlags {
		fmt.Printf("listen=%s discovery=%s k8s-namespace=%s network=%s log-level=%s aerospike=%s as-namespace=%s reservation-sweep=%s max-inflight=%d account-cache=%d pprof=%s\n",
			f.listen, f.discovery, f.k8sNamespace, f.network, level, f.aerospike, f.namespace, f.sweep, f.maxInFlight, f.accountCache, f.pprof)
		return nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", "abm")
	slog.SetDefault(log)
	stopTracing, err := startTracing(tracing, "abm", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if f.pprof != "" {
		if _, _, err := chassis.StartPprof(f.pprof, log); err != nil {
			return err
		}
	}

	cl, err := dialAerospike(hosts)
	if err != nil {
		return err
	}
	defer cl.Close()
	cache := f.accountCache
	if cache <= 0 {
		cache = -1 // abm.Config: negative = off
	}
	svc := abm.New(cl, abm.Config{Namespace: f.namespace, AccountCache: cache, Logger: log})
	if err := svc.RegisterMetrics(telemetry.Meter()); err != nil {
		return err
	}
	srv, err := chassis.NewServer(chassis.ServerConfig{
		Service: "abm", Listen: f.listen, Handler: svc.Handler(), Ready: svc.Ready, MaxInFlight: f.maxInFlight, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("cannot create ABM server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return err
	}
	log.Info("serving", "addr", srv.Addr(), "aerospike", f.aerospike, "namespace", f.namespace)
	ctx, stopSweep := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); svc.RunSweeper(ctx, f.sweep) }()

	awaitStopSignal(log)
	stopSweep()
	<-sweepDone
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("cannot stop ABM server: %w", err)
	}
	return nil
}

// aerospikeHosts parses an --aerospike list of host:port seeds.
func aerospikeHosts(list string) ([]*as.Host, error) {
	var hosts []*as.Host
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("cannot parse --aerospike %q: %w", a, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("cannot parse --aerospike %q: bad port", a)
		}
		hosts = append(hosts, as.NewHost(h, port))
	}
	if len(hosts) == 0 {
		return nil, errors.New("cannot use --aerospike: no host:port given")
	}
	return hosts, nil
}

// dialAerospike connects the official client to the seed hosts.
func dialAerospike(hosts []*as.Host) (*as.Client, error) {
	cp := as.NewClientPolicy()
	cp.Timeout = 10 * time.Second
	cp.ConnectionQueueSize = 1024
	cl, err := as.NewClientWithPolicyAndHost(cp, hosts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to aerospike: %w", err)
	}
	return cl, nil
}

// awaitStopSignal blocks until SIGINT or SIGTERM.
func awaitStopSignal(log *slog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	signal.Stop(sig)
	log.Info("stopping", "signal", got.String())
}
