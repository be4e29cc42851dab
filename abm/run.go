package abm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chassis/service"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
)

// About is the help text of the abm command.
const About = "Runs the Account Balance Manager."

// ServiceConfig is the configuration of the abm command (`chf abm`): one
// field per flag. Start from DefaultServiceConfig. The ABM calls no peer
// service, so it has no discovery flags.
type ServiceConfig struct {
	service.Base
	// Aerospike is the comma-separated host:port list of seed nodes.
	Aerospike        string
	Namespace        string
	ReservationSweep time.Duration
	// SweepRate caps the sweep's records per second (Config.SweepRate;
	// 0 = no cap); NotifyQueue bounds its queued re-authorisations.
	SweepRate   float64
	NotifyQueue int
	MaxInFlight int
	// AccountCache is the cache size; 0 or negative = off.
	AccountCache int
	// AccountCacheAge is how long a cached state is used (Config.AccountCacheAge).
	AccountCacheAge time.Duration
	// MaxSessions is the cap on one account's open sessions (Config.MaxSessions).
	MaxSessions int
	// TLS of the ABM API (--tls-*).
	TLS tlsconfig.Config
}

// maxAccountCacheAge bounds --account-cache-age.
const maxAccountCacheAge = 24 * time.Hour

// DefaultServiceConfig returns the defaults of the abm flags.
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{
		Base:             service.Base{Listen: "127.0.0.1:8082", Tracing: true},
		Aerospike:        "127.0.0.1:3000",
		Namespace:        "chf",
		ReservationSweep: time.Minute,
		SweepRate:        DefaultSweepRate,
		NotifyQueue:      1 << 16,
		MaxInFlight:      4096,
		AccountCache:     1 << 16,
		AccountCacheAge:  10 * time.Second,
		MaxSessions:      DefaultMaxSessions,
		TLS:              tlsconfig.Default(),
	}
}

// RegisterFlags registers the abm flags, c's values as defaults.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "host:port serving the ABM API (POST "+abmclient.ApplyPath+", msgp), /healthz, /readyz and /metrics")
	RegisterAerospikeFlags(fs, &c.Aerospike, &c.Namespace)
	fs.DurationVar(&c.ReservationSweep, "reservation-sweep", c.ReservationSweep, "interval of the background scan releasing expired reservations and sessions and finding the open sessions to re-authorise (granted under an older tariff, or holding units of an expired bucket); each pass is spread over 90% of it; 0 = off (expired reservations are still released on the account's next access, nobody is re-authorised)")
	fs.Float64Var(&c.SweepRate, "sweep-rate", c.SweepRate, "most account records the sweep scans per second (a pass over more than interval × rate records takes longer than --reservation-sweep); 0 = no cap")
	fs.IntVar(&c.NotifyQueue, "notify-queue", c.NotifyQueue, "re-authorisations the sweep queues for the CGWs to take (chf.OpNotifications); beyond it they are dropped and counted (abm_notifications_dropped), and the next pass finds them again")
	fs.IntVar(&c.MaxInFlight, "max-inflight", c.MaxInFlight, "requests served at once; beyond it requests get 503 at once")
	fs.IntVar(&c.AccountCache, "account-cache", c.AccountCache, "accounts whose last written state the ABM keeps to skip the read of their next charging event (writes stay generation-checked); 0 or negative = off, which is required when account records may be deleted and re-created while the ABM runs")
	fs.DurationVar(&c.AccountCacheAge, "account-cache-age", c.AccountCacheAge, "how long after its write a cached account state is used; an event later than that reads the record (a longer age saves the reads of sessions whose updates come further apart, at the memory of more entries held); up to "+maxAccountCacheAge.String())
	fs.IntVar(&c.MaxSessions, "max-sessions", c.MaxSessions, fmt.Sprintf("open sessions (each holding its reservations in the account record, about %d bytes with one rating group) one account may have; a create beyond them is refused with END_USER_SERVICE_DENIED (Nchf 403 END_USER_REQUEST_DENIED, Gy 4010), nothing charged or reserved; 1..%d", SessionRecordBytes, MaxSessionsLimit))
	c.TLS.RegisterFlags(fs, "")
}

// RegisterAerospikeFlags registers --aerospike and --as-namespace (the
// abm and provision commands share them), the pointed-to values as
// defaults.
func RegisterAerospikeFlags(fs *flag.FlagSet, seeds, namespace *string) {
	fs.StringVar(seeds, "aerospike", *seeds, "Aerospike seed nodes, comma-separated host:port (aslite or a real cluster)")
	fs.StringVar(namespace, "as-namespace", *namespace, "Aerospike namespace of the account records (set \"accounts\", key = SUPI)")
}

// Validate checks the flags' values.
func (c *ServiceConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if _, err := provision.ParseHosts(c.Aerospike); err != nil {
		return err
	}
	if c.Namespace == "" {
		return errors.New("cannot use --as-namespace: empty")
	}
	if c.MaxSessions < 1 || c.MaxSessions > MaxSessionsLimit {
		return fmt.Errorf("cannot use --max-sessions %d: must be 1..%d", c.MaxSessions, MaxSessionsLimit)
	}
	if c.AccountCacheAge <= 0 || c.AccountCacheAge > maxAccountCacheAge {
		return fmt.Errorf("cannot use --account-cache-age %v: must be positive and at most %v", c.AccountCacheAge, maxAccountCacheAge)
	}
	if c.SweepRate < 0 {
		return fmt.Errorf("cannot use --sweep-rate %g: must not be negative (0 = no cap)", c.SweepRate)
	}
	if c.NotifyQueue <= 0 || c.NotifyQueue > MaxNotifyQueue {
		// The queue is allocated whole at start.
		return fmt.Errorf("cannot use --notify-queue %d: must be 1..%d", c.NotifyQueue, MaxNotifyQueue)
	}
	if c.ReservationSweep < 0 {
		return fmt.Errorf("cannot use --reservation-sweep %v: must not be negative", c.ReservationSweep)
	}
	if c.MaxInFlight <= 0 {
		return fmt.Errorf("cannot use --max-inflight %d: must be positive", c.MaxInFlight)
	}
	return c.TLS.Validate()
}

// config is the service's Config from the flags.
func (c *ServiceConfig) config(log *slog.Logger) Config {
	cache := c.AccountCache
	if cache <= 0 {
		cache = -1 // Config: negative = off
	}
	rate := c.SweepRate
	if rate == 0 {
		rate = -1 // Config: negative = no cap
	}
	return Config{Namespace: c.Namespace, AccountCache: cache, AccountCacheAge: c.AccountCacheAge, MaxSessions: c.MaxSessions,
		SweepRate: rate, NotifyQueue: c.NotifyQueue, Logger: log}
}

// String is the configuration as name=value pairs of its flags.
func (c ServiceConfig) String() string { return service.ConfigString(&c) }

// Common implements service.Config.
func (c *ServiceConfig) Common() *service.Base { return &c.Base }

// AddTo adds the ABM's components to g: the Aerospike client, the server
// and the reservation sweeper.
func (c *ServiceConfig) AddTo(g *service.Group, log *slog.Logger) error {
	hosts, err := provision.ParseHosts(c.Aerospike)
	if err != nil {
		return err
	}
	files, err := c.TLS.AddTo(g, log)
	if err != nil {
		return err
	}
	var cl *as.Client
	g.Add("Aerospike client", func() error {
		cl, err = Dial(hosts)
		return err
	}, func(context.Context) error { cl.Close(); return nil })
	var svc *Service
	var srv *server.Server
	g.Add("ABM server", func() error {
		svc = New(cl, c.config(log))
		if err := svc.RegisterMetrics(telemetry.Meter()); err != nil {
			return err
		}
		var err error
		srv, err = server.New(server.Config{
			Service: "abm", Listen: c.Listen, MaxBodySize: rpc.MaxBodySize, Handler: svc.Handler(), Ready: svc.Ready, MaxInFlight: c.MaxInFlight, Logger: log,
			TLS: c.TLS.Server(files, "http/1.1"),
		})
		if err != nil {
			return fmt.Errorf("cannot create ABM server: %w", err)
		}
		if err := srv.Start(); err != nil {
			return err
		}
		log.Info("serving", "addr", srv.Addr(), "aerospike", c.Aerospike, "namespace", c.Namespace)
		return nil
	}, func(ctx context.Context) error { return srv.Shutdown(ctx) })
	g.Background("reservation sweeper", func(ctx context.Context) { svc.RunSweeper(ctx, c.ReservationSweep) })
	return nil
}

// connBuffer is the least buffer the official client's connections keep
// (as.MinBufferSize, a process-wide setting of the client, 8 KiB by
// default). Every 5 s the client shrinks a connection's buffer to the
// median size of its recent commands, and a larger command then takes a
// buffer from the client's pool that v7.10.2 never puts back (command.go
// compares the addresses of two struct fields, which always differ, and
// so puts back the compression buffer, nil): one fresh buffer per large
// batch write, 26% of the bytes the ABM allocated at 30,000 TPS. 128 KiB
// holds a batch write of 256 events on accounts of some 400-byte records;
// new connections start with it (as.DefaultBufferSize, 64 KiB otherwise).
const connBuffer = 128 << 10

var setConnBuffer sync.Once

// Dial connects the official client to the seed hosts.
func Dial(hosts []*as.Host) (*as.Client, error) {
	setConnBuffer.Do(func() {
		as.MinBufferSize = max(as.MinBufferSize, connBuffer)
		as.DefaultBufferSize = max(as.DefaultBufferSize, connBuffer)
	})
	cp := as.NewClientPolicy()
	cp.Timeout = 10 * time.Second
	cp.ConnectionQueueSize = 1024
	cl, err := as.NewClientWithPolicyAndHost(cp, hosts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to aerospike: %w", err)
	}
	return cl, nil
}
