package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// DNSConfig configures a DNS source.
type DNSConfig struct {
	// Interval between resolutions (default 5s).
	Interval time.Duration
	// Resolver defaults to net.DefaultResolver.
	Resolver *net.Resolver
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnResult, if set, is called after every resolution with its error
	// (nil on success); the chassis uses it for staleness metrics.
	OnResult func(err error)
}

// DNS returns a Source resolving target periodically. target is host:port;
// the A/AAAA records of host (a headless Service name) give the endpoints.
// When host starts with '_' (as in _grpc._tcp.ocp.ns.svc) its SRV records
// are resolved instead and their ports used, and port may be omitted. When
// a resolution fails the last set stays in use.
func DNS(target string, cfg DNSConfig) (Source, error) {
	host, port := target, ""
	if h, p, err := net.SplitHostPort(target); err == nil {
		host, port = h, p
	}
	srv := strings.HasPrefix(host, "_")
	if !srv {
		if port == "" {
			return nil, fmt.Errorf("cannot parse DNS peer %q: want host:port", target)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("cannot parse port of DNS peer %q: %w", target, err)
		}
	}
	if host == "" {
		return nil, fmt.Errorf("cannot parse DNS peer %q: empty host", target)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &dnsSource{host: host, port: port, srv: srv, cfg: cfg}, nil
}

type dnsSource struct {
	HealthState
	host, port string
	srv        bool
	cfg        DNSConfig
}

func (s *dnsSource) resolve(ctx context.Context) ([]Endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
	defer cancel()
	var eps []Endpoint
	if s.srv {
		_, recs, err := s.cfg.Resolver.LookupSRV(ctx, "", "", s.host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve SRV %s: %w", s.host, err)
		}
		for _, r := range recs {
			port := strconv.Itoa(int(r.Port))
			if s.port != "" {
				port = s.port
			}
			addrs, err := s.cfg.Resolver.LookupHost(ctx, strings.TrimSuffix(r.Target, "."))
			if err != nil {
				return nil, fmt.Errorf("cannot resolve SRV target %s: %w", r.Target, err)
			}
			for _, a := range addrs {
				eps = append(eps, Endpoint{Addr: net.JoinHostPort(a, port)})
			}
		}
	} else {
		addrs, err := s.cfg.Resolver.LookupHost(ctx, s.host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %w", s.host, err)
		}
		for _, a := range addrs {
			eps = append(eps, Endpoint{Addr: net.JoinHostPort(a, s.port)})
		}
	}
	return Dedup(eps), nil
}

func (s *dnsSource) Run(ctx context.Context, update func([]Endpoint)) error {
	var last []Endpoint
	delivered := false
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		eps, err := s.resolve(ctx)
		if ctx.Err() == nil {
			s.Report(err, time.Now())
			if s.cfg.OnResult != nil {
				s.cfg.OnResult(err)
			}
		}
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.Warn("DNS resolution failed; keeping last endpoint set", "host", s.host, "endpoints", len(last), "err", err)
		case err == nil && (!delivered || !Equal(eps, last)):
			last, delivered = eps, true
			update(append([]Endpoint(nil), eps...))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
