package aslite

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis"
)

// About is the help text of the aslite command.
const About = `Serves an in-memory, single-node store speaking the Aerospike wire protocol,
for the official Go client (aerospike-client-go/v7). Data is lost on exit.`

// ServiceConfig is the configuration of the aslite command (`chf
// aslite`): one field per flag. Start from DefaultServiceConfig.
type ServiceConfig struct {
	chassis.Base
	// Namespaces is the comma-separated list of namespaces served.
	Namespaces      string
	DefaultTTL      time.Duration
	ReclaimInterval time.Duration
}

// DefaultServiceConfig returns the defaults of the aslite flags.
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{
		Base:            chassis.Base{Listen: "127.0.0.1:3000"},
		Namespaces:      "chf",
		ReclaimInterval: 5 * time.Second,
	}
}

// RegisterFlags registers the aslite flags, c's values as defaults.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "host:port to serve the Aerospike wire protocol on")
	fs.StringVar(&c.Namespaces, "namespace", c.Namespaces, "comma-separated namespaces to serve, each 1 to 31 bytes")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", c.DefaultTTL, "namespace default TTL for writes that ask for it (TTL 0); 0 = never expire")
	fs.DurationVar(&c.ReclaimInterval, "reclaim-interval", c.ReclaimInterval, "how often expired records are deleted and their memory reclaimed")
}

// Validate checks the flags' values.
func (c *ServiceConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if _, err := New(c.config(nil)); err != nil {
		return fmt.Errorf("cannot use --namespace, --default-ttl or --reclaim-interval: %w", err)
	}
	return nil
}

func (c *ServiceConfig) config(log *slog.Logger) Config {
	var ns []string
	for _, n := range strings.Split(c.Namespaces, ",") {
		if n = strings.TrimSpace(n); n != "" {
			ns = append(ns, n)
		}
	}
	return Config{Namespaces: ns, Logger: log, DefaultTTL: c.DefaultTTL, ReclaimInterval: c.ReclaimInterval}
}

// String is the configuration as name=value pairs of its flags.
func (c ServiceConfig) String() string { return chassis.ConfigString(&c) }

// Common implements chassis.Service.
func (c *ServiceConfig) Common() *chassis.Base { return &c.Base }

// AddTo adds the aslite server to g.
func (c *ServiceConfig) AddTo(g *chassis.Group, log *slog.Logger) error {
	srv, err := New(c.config(log))
	if err != nil {
		return fmt.Errorf("cannot configure aslite: %w", err)
	}
	g.Add("aslite", func() error { return srv.Start(c.Listen) }, func(context.Context) error { return srv.Close() })
	return nil
}
