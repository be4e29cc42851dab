package ocp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chassis/service"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
	"github.com/chf-testbed/testbed/tariff"
)

// About is the help text of the ocp command.
const About = "Runs the Online Charging Processor."

// ServiceConfig is the configuration of the ocp command (`chf ocp`): one
// field per flag. Start from DefaultServiceConfig.
type ServiceConfig struct {
	service.Base
	ABM         peer.Flags
	Batch       batcher.Config
	Tariff      string
	MaxInFlight int
	CDR         cdr.Config
	// TLS of the OCP API (--tls-*) and of the calls to the ABM
	// (--peer-tls).
	TLS tlsconfig.Config
}

// DefaultServiceConfig returns the defaults of the ocp flags.
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{
		Base:        service.Base{Listen: "127.0.0.1:8081", Tracing: true},
		ABM:         peer.Flags{Name: "abm", Addr: "127.0.0.1:8082", Discovery: "static"},
		Batch:       batcher.Config{MaxInFlight: batcher.DefaultInFlight, MaxItems: batcher.DefaultItems},
		MaxInFlight: 4096,
		CDR:         cdr.DefaultConfig(),
		TLS:         tlsconfig.Default(),
	}
}

// RegisterFlags registers the ocp flags, c's values as defaults.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "host:port serving the OCP API (POST "+ocpclient.ChargePath+", msgp), /healthz, /readyz and /metrics")
	c.ABM.RegisterFlags(fs)
	rpc.RegisterBatchFlags(fs, &c.Batch, "abm")
	fs.StringVar(&c.Tariff, "tariff", c.Tariff, "tariff file (YAML or JSON: rating group → service, price, grant, validity); empty = the built-in default (ocp/README.md). Reloaded when it is replaced or its mtime or size changes, and on SIGHUP; an invalid file keeps the old tariff (logged)")
	fs.IntVar(&c.MaxInFlight, "max-inflight", c.MaxInFlight, "requests served at once; beyond it requests get 503 at once")
	c.CDR.RegisterFlags(fs)
	c.TLS.RegisterFlags(fs, "ABM")
}

// Validate checks the flags' values, the tariff file included.
func (c *ServiceConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if c.MaxInFlight <= 0 {
		return fmt.Errorf("cannot use --max-inflight %d: must be positive", c.MaxInFlight)
	}
	if _, err := tariff.Load(c.Tariff); err != nil {
		return err
	}
	if err := c.CDR.Validate(); err != nil {
		return err
	}
	if _, err := c.ABM.Source(); err != nil {
		return err
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	return rpc.ValidateBatch(c.Batch)
}

// String is the configuration as name=value pairs of its flags.
func (c ServiceConfig) String() string { return service.ConfigString(&c) }

// Common implements service.Config.
func (c *ServiceConfig) Common() *service.Base { return &c.Base }

// AddTo adds the OCP's components to g: the ABM client and the server.
func (c *ServiceConfig) AddTo(g *service.Group, log *slog.Logger) error {
	t, err := tariff.Load(c.Tariff)
	if err != nil {
		return err
	}
	files, err := c.TLS.AddTo(g, log)
	if err != nil {
		return err
	}
	var client *peer.Client
	g.Add("ABM client", func() error {
		src, err := c.ABM.Source()
		if err != nil {
			return err
		}
		client, err = peer.New(peer.Config{
			Peer: "abm", Source: src, TLS: c.TLS.Client(files), Logger: log,
			// A round trip whose requests all carry an identity the ABM
			// keeps (chf.ApplyRequest.Repeatable) is retried on another
			// ABM after a failure that may have reached the first (the
			// connection lost, 502/503/504), within the caller's deadline:
			// the ABM answers a repeat as the first (Replayed, with its
			// charge), charging once. Others only when never sent.
			Retry: peer.RetryConfig{MinBudget: retryBurst},
		})
		if err != nil {
			return fmt.Errorf("cannot create ABM client: %w", err)
		}
		return nil
	}, func(context.Context) error { client.Close(); return nil })
	// The CDR recorder starts before the server and stops after it, so
	// every request the server answered is recorded.
	var rec *cdr.Recorder
	if c.CDR.Dir != "" {
		g.Add("CDR writer", func() error {
			var err error
			rec, err = cdr.NewRecorder(c.CDR, nil, log)
			if err != nil {
				return fmt.Errorf("cannot start CDR writer: %w", err)
			}
			log.Info("writing CDRs", "dir", c.CDR.Dir)
			return nil
		}, func(ctx context.Context) error { return rec.Close(ctx) })
	}
	var srv *server.Server
	var proc *Processor
	g.Add("OCP server", func() error {
		proc = NewProcessor(t, abmclient.New(client, c.Batch))
		if rec != nil {
			proc.SetSink(rec)
		}
		var err error
		srv, err = server.New(server.Config{
			Service: "ocp", Listen: c.Listen, MaxBodySize: rpc.MaxBodySize, Handler: Handler(proc), MaxInFlight: c.MaxInFlight, Logger: log,
			TLS: c.TLS.Server(files, "http/1.1"),
			Ready: func(ctx context.Context) error {
				if len(client.Endpoints()) == 0 {
					return errors.New("no ABM endpoint known")
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
		log.Info("serving", "addr", srv.Addr(), "abm", c.ABM.Addr, "tariff", c.Tariff)
		return nil
	}, func(ctx context.Context) error { return srv.Shutdown(ctx) })
	if c.Tariff != "" {
		// proc is made by the server's start, which runs before this one.
		g.Background("tariff reload", func(ctx context.Context) { NewTariffWatcher(proc, c.Tariff, log).Run(ctx) })
	}
	return nil
}

// retryBurst is the retry budget of the ABM client at rest: enough for the
// round trips in flight to one ABM when it dies.
const retryBurst = 100
