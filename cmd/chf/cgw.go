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
	"path"
	rpprof "runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/ocp"
)

func init() {
	register("cgw", "Charging Gateway: Nchf_ConvergedCharging (h2c + HTTP/1.1), balance inquiry, Diameter Gy", runCGW)
}

type cgwFlags struct {
	listen, discovery, k8sNamespace, network, logLevel string
	ocp, diameter                                      string
	originHost, originRealm                            string
	allowHosts, allowRealms                            string
	maxBody, maxInFlight                               int
	pprof, cpuProfile                                  string
	checkFlags                                         bool
}

func runCGW(args []string) error {
	var f cgwFlags
	fs := flag.NewFlagSet("cgw", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080",
		"host:port for Nchf_ConvergedCharging over HTTP/2 cleartext (prior knowledge) and HTTP/1.1 on one port, plus the balance inquiry GET /chf/v1/accounts/{supi}, /healthz, /readyz and /metrics")
	fs.StringVar(&f.discovery, "discovery", chassis.DiscoveryStatic,
		"how to find the OCP: static (--ocp is a comma-separated host:port list), dns (--ocp is host:port of a headless service) or kubernetes (--ocp is service[:port])")
	fs.StringVar(&f.k8sNamespace, "k8s-namespace", "", "Kubernetes namespace for --discovery=kubernetes (env also POD_NAMESPACE)")
	fs.StringVar(&f.network, "network", "", "Multus network whose addresses to use for peers; empty = the pod IP")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.ocp, "ocp", "127.0.0.1:8081", "the OCP peer, in the form --discovery wants")
	fs.StringVar(&f.diameter, "diameter", "", "host:port to serve Diameter Gy (RFC 4006 credit control) on; empty = off")
	fs.StringVar(&f.originHost, "diameter-origin-host", "cgw.chf.test", "Diameter Origin-Host of the CGW")
	fs.StringVar(&f.originRealm, "diameter-origin-realm", "chf.test", "Diameter Origin-Realm of the CGW")
	fs.StringVar(&f.allowHosts, "diameter-allow-host", "",
		"comma-separated Origin-Host patterns (path.Match: *.pgw.example) of the Diameter peers allowed to connect; others get DIAMETER_UNKNOWN_PEER at CER and are closed; empty = any host")
	fs.StringVar(&f.allowRealms, "diameter-allow-realm", "",
		"comma-separated Origin-Realm patterns (path.Match) of the Diameter peers allowed to connect; a peer must match both lists; empty = any realm")
	fs.IntVar(&f.maxBody, "max-body", 64<<10, "largest Nchf request body in bytes; larger ones get 413 ProblemDetails")
	fs.IntVar(&f.maxInFlight, "max-inflight", 4096, "Nchf requests charged at once; beyond it requests get 503 (NF_CONGESTION) at once instead of queueing")
	fs.StringVar(&f.pprof, "pprof", "", "host:port to serve net/http/pprof on (profiling); empty = off")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (stopped at exit)")
	fs.BoolVar(&f.checkFlags, "check-flags", false, "parse and validate flags and environment, print the resolved configuration and exit without starting")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chf cgw [flags]\n\nRuns the Charging Gateway. Every flag also reads CHF_<FLAG> (upper case, '-' → '_')\nfrom the environment when not given.\n\nflags:\n")
		fs.PrintDefaults()
	}
	tracing := chassis.TelemetryFlags(fs)
	batch, checkBatch := batchFlags(fs, "ocp")
	level, err := parseServiceFlags(fs, args, &f.listen, &f.logLevel)
	if err != nil {
		return err
	}
	if f.maxBody <= 0 || f.maxInFlight <= 0 {
		return errors.New("cannot use --max-body and --max-inflight: both must be positive")
	}
	if f.diameter != "" {
		if _, _, err := net.SplitHostPort(f.diameter); err != nil {
			return fmt.Errorf("cannot parse --diameter %q: %w", f.diameter, err)
		}
	}
	allowHosts, allowRealms := splitList(f.allowHosts), splitList(f.allowRealms)
	for _, p := range append(append([]string(nil), allowHosts...), allowRealms...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("cannot use --diameter-allow-host/--diameter-allow-realm pattern %q: %w", p, err)
		}
	}
	src, err := chassis.PeerSource(f.discovery, f.ocp, chassis.WithNamespace(f.k8sNamespace), chassis.WithNetwork(f.network))
	if err != nil {
		return fmt.Errorf("cannot use --ocp: %w", err)
	}
	if err := checkTracing(tracing); err != nil {
		return err
	}
	if err := checkBatch(); err != nil {
		return err
	}
	if f.checkFlags {
		fmt.Printf("listen=%s discovery=%s k8s-namespace=%s network=%s log-level=%s ocp=%s diameter=%s diameter-origin-host=%s diameter-origin-realm=%s diameter-allow-host=%s diameter-allow-realm=%s max-body=%d max-inflight=%d pprof=%s cpuprofile=%s batch-inflight=%d batch-max=%d\n",
			f.listen, f.discovery, f.k8sNamespace, f.network, level, f.ocp, f.diameter, f.originHost, f.originRealm, f.allowHosts, f.allowRealms, f.maxBody, f.maxInFlight, f.pprof, f.cpuProfile, batch.MaxInFlight, batch.MaxItems)
		return nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", "cgw")
	slog.SetDefault(log)
	stopTracing, err := startTracing(tracing, "cgw", log)
	if err != nil {
		return err
	}
	defer stopTracing()

	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("cannot create --cpuprofile: %w", err)
		}
		if err := rpprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("cannot start CPU profile: %w", err)
		}
		defer func() { rpprof.StopCPUProfile(); pf.Close() }()
	}
	if f.pprof != "" {
		if _, _, err := chassis.StartPprof(f.pprof, log); err != nil {
			return err
		}
	}

	client, err := chassis.NewClient(chassis.ClientConfig{Peer: "ocp", Source: src, Logger: log})
	if err != nil {
		return fmt.Errorf("cannot create OCP client: %w", err)
	}
	defer client.Close()
	charger := ocp.NewClient(client, *batch)
	srv, err := cgw.NewServer(cgw.Config{
		Listen:  f.listen,
		Handler: cgw.HandlerConfig{Charger: charger, MaxBody: f.maxBody, MaxInFlight: f.maxInFlight, Logger: log},
		Ready:   peerReady(client),
		Logger:  log,
	})
	if err != nil {
		return fmt.Errorf("cannot create CGW server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return err
	}
	var dia *diameter.Server
	if f.diameter != "" {
		dia, err = diameter.NewServer(diameter.Config{
			OriginHost: f.originHost, OriginRealm: f.originRealm, MaxInFlight: f.maxInFlight, Logger: log,
			AllowHosts: allowHosts, AllowRealms: allowRealms,
		}, charger)
		if err != nil {
			return fmt.Errorf("cannot create Diameter server: %w", err)
		}
		if err := dia.RegisterMetrics(telemetry.Meter()); err != nil {
			return err
		}
		if err := dia.Listen(f.diameter); err != nil {
			return err
		}
		log.Info("serving Diameter Gy", "addr", dia.Addr())
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	signal.Stop(sig)
	log.Info("stopping", "signal", got.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if dia != nil {
		if err := dia.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot stop Diameter server: %w", err))
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("cannot stop CGW server: %w", err))
	}
	return errors.Join(errs...)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// peerReady reports ready once one OCP endpoint answers its /readyz.
func peerReady(c *chassis.Client) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		eps := c.Endpoints()
		if len(eps) == 0 {
			return errors.New("no OCP endpoint known")
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(2 * time.Second)
		}
		var last error
		for _, ep := range eps {
			status, _, err := fasthttp.GetDeadline(nil, "http://"+ep+"/readyz", deadline)
			if err == nil && status == fasthttp.StatusOK {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("OCP %s /readyz answered %d", ep, status)
			}
			last = err
		}
		return last
	}
}
