// Package aslitecmd is the aslite command (`chf aslite`, cmd/aslite): its
// flags and its place in a chassis run group. It keeps the chassis out of
// package aslite, the store, which stands alone.
package aslitecmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/abm/aslite"
	"github.com/chf-testbed/testbed/chassis/service"
)

// About is the help text of the aslite command.
const About = `Serves an in-memory, single-node store speaking the Aerospike wire protocol,
for the official Go client (aerospike-client-go/v7). Data is lost on exit unless
--data-dir names a directory: then every change is logged there (fsynced per --commit)
and recovered at start-up, so a restart or a kill -9 keeps the acknowledged writes.`

// ServiceConfig is the configuration of the aslite command (`chf
// aslite`): one field per flag. Start from DefaultServiceConfig.
type ServiceConfig struct {
	service.Base
	// Namespaces is the comma-separated list of namespaces served.
	Namespaces      string
	DefaultTTL      time.Duration
	ReclaimInterval time.Duration
	// DataDir, Commit and CommitInterval are aslite.Config's durability
	// fields.
	DataDir        string
	Commit         string
	CommitInterval time.Duration
	// FirstRequestTimeout, IdleTimeout and WriteTimeout are aslite.Config's
	// connection timeouts.
	FirstRequestTimeout, IdleTimeout, WriteTimeout time.Duration
}

// DefaultServiceConfig returns the defaults of the aslite flags.
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{
		Base:                service.Base{Listen: "127.0.0.1:3000"},
		Namespaces:          "chf",
		ReclaimInterval:     5 * time.Second,
		Commit:              string(aslite.CommitSync),
		CommitInterval:      100 * time.Millisecond,
		FirstRequestTimeout: 10 * time.Second,
		WriteTimeout:        30 * time.Second,
	}
}

// RegisterFlags registers the aslite flags, c's values as defaults.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "host:port to serve the Aerospike wire protocol on")
	fs.StringVar(&c.Namespaces, "namespace", c.Namespaces, "comma-separated namespaces to serve, each 1 to 31 bytes")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", c.DefaultTTL, "namespace default TTL for writes that ask for it (TTL 0); 0 = never expire")
	fs.DurationVar(&c.ReclaimInterval, "reclaim-interval", c.ReclaimInterval, "how often expired records are deleted and their memory reclaimed; negative = never (0 = the default)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the append-only log and snapshots that make the store survive a restart or a crash (created if missing); empty = memory only, data lost on exit")
	fs.StringVar(&c.Commit, "commit", c.Commit, "with --data-dir, when a write is acknowledged: sync (after the log holding it is fsynced; concurrent writes share an fsync) or interval (at once; the log is fsynced every --commit-interval, so a crash loses at most that)")
	fs.DurationVar(&c.CommitInterval, "commit-interval", c.CommitInterval, "with --commit interval, how often the log is fsynced")
	fs.DurationVar(&c.FirstRequestTimeout, "first-request-timeout", c.FirstRequestTimeout, "close a connection that sends no complete request within this of being accepted")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close a connection that sends nothing for this long; 0 = never (clients' pools expect that unless their idle timeout is set below it)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "abandon a reply to a client that does not read it within this")
}

// Validate checks the flags' values.
func (c *ServiceConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if _, err := aslite.ParseCommit(c.Commit); err != nil {
		return fmt.Errorf("cannot use --commit: %w", err)
	}
	if c.CommitInterval <= 0 {
		return fmt.Errorf("cannot use --commit-interval %s: must be positive", c.CommitInterval)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--first-request-timeout", c.FirstRequestTimeout}, {"--idle-timeout", c.IdleTimeout}, {"--write-timeout", c.WriteTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("cannot use %s %s: must not be negative", d.flag, d.v)
		}
	}
	cfg := c.config(nil)
	cfg.DataDir = "" // New would open (and recover) it; Validate only checks
	if _, err := aslite.New(cfg); err != nil {
		return fmt.Errorf("cannot use --namespace, --default-ttl or --reclaim-interval: %w", err)
	}
	return nil
}

func (c *ServiceConfig) config(log *slog.Logger) aslite.Config {
	var ns []string
	for _, n := range strings.Split(c.Namespaces, ",") {
		if n = strings.TrimSpace(n); n != "" {
			ns = append(ns, n)
		}
	}
	return aslite.Config{
		Namespaces: ns, Logger: log, DefaultTTL: c.DefaultTTL, ReclaimInterval: c.ReclaimInterval,
		DataDir: c.DataDir, Commit: aslite.Commit(c.Commit), CommitInterval: c.CommitInterval,
		FirstRequestTimeout: c.FirstRequestTimeout, IdleTimeout: c.IdleTimeout, WriteTimeout: c.WriteTimeout,
	}
}

// String is the configuration as name=value pairs of its flags.
func (c ServiceConfig) String() string { return service.ConfigString(&c) }

// Common implements service.Config.
func (c *ServiceConfig) Common() *service.Base { return &c.Base }

// AddTo adds the aslite server to g.
func (c *ServiceConfig) AddTo(g *service.Group, log *slog.Logger) error {
	srv, err := aslite.New(c.config(log))
	if err != nil {
		return fmt.Errorf("cannot configure aslite: %w", err)
	}
	g.Add("aslite", func() error { return srv.Start(c.Listen) }, func(context.Context) error { return srv.Close() })
	return nil
}
