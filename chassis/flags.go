package chassis

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/discovery/kubernetes"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "CHF_"

// envAliases lists further environment variables read for a flag, after
// CHF_<NAME>, in the form Kubernetes sets them (downward API).
var envAliases = map[string][]string{
	"k8s-namespace": {"POD_NAMESPACE"},
}

// EnvName returns the environment variable read for flag name:
// CHF_ + name upper-cased with '-' and '.' replaced by '_'.
func EnvName(name string) string {
	return EnvPrefix + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(name))
}

// ParseFlags parses args into fs, then sets every flag not given on the
// command line from its environment variable (EnvName(flag), and
// POD_NAMESPACE for --k8s-namespace) when that is set. A bad value in the
// environment is an error naming the variable and the flag. It returns
// flag.ErrHelp for -h/--help like fs.Parse.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		for _, env := range append([]string{EnvName(f.Name)}, envAliases[f.Name]...) {
			v, ok := os.LookupEnv(env)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("cannot set --%s from environment variable %s=%q: %w", f.Name, env, v, err))
			}
			return
		}
	})
	return errors.Join(errs...)
}

// Discovery modes accepted by PeerSource (the --discovery flag).
const (
	DiscoveryStatic     = "static"
	DiscoveryDNS        = "dns"
	DiscoveryKubernetes = "kubernetes"
)

// ErrUnknownDiscovery is returned by PeerSource for an unknown mode.
var ErrUnknownDiscovery = errors.New("chassis: unknown discovery mode")

// PeerOption adjusts how PeerSource builds a source.
type PeerOption func(*peerOptions)

type peerOptions struct {
	namespace    string
	network      string
	resolveEvery time.Duration
	resolver     *net.Resolver
}

// WithNamespace sets the Kubernetes namespace of the peer service
// (--k8s-namespace; empty = $POD_NAMESPACE).
func WithNamespace(ns string) PeerOption { return func(o *peerOptions) { o.namespace = ns } }

// WithNetwork selects the Multus network whose pod addresses are used
// instead of the pod IP (--network); empty means the pod IP.
func WithNetwork(name string) PeerOption { return func(o *peerOptions) { o.network = name } }

// WithResolveInterval sets how often DNS names are re-resolved (default 5s).
func WithResolveInterval(d time.Duration) PeerOption {
	return func(o *peerOptions) { o.resolveEvery = d }
}

// WithResolver sets the DNS resolver (tests); default net.DefaultResolver.
func WithResolver(r *net.Resolver) PeerOption { return func(o *peerOptions) { o.resolver = r } }

// PeerSource builds a Source from --discovery (mode) and a peer flag:
//   - static: comma-separated host:port list;
//   - dns: host:port of a headless service, re-resolved periodically (A/AAAA
//     records; a "_service._proto.name" host resolves SRV records instead);
//   - kubernetes: service name[:port] in the namespace of WithNamespace.
func PeerSource(mode, peer string, opts ...PeerOption) (discovery.Source, error) {
	o := peerOptions{resolveEvery: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	peer = strings.TrimSpace(peer)
	if peer == "" {
		return nil, fmt.Errorf("chassis: peer address is empty for --discovery=%s", mode)
	}
	switch mode {
	case "", DiscoveryStatic:
		var addrs []string
		for _, a := range strings.Split(peer, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("cannot parse static peer address %q: %w", a, err)
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("cannot parse static peer %q: %w", peer, discovery.ErrNoAddresses)
		}
		return discovery.Static(addrs...), nil
	case DiscoveryDNS:
		return discovery.DNS(peer, discovery.DNSConfig{Interval: o.resolveEvery, Resolver: o.resolver})
	case DiscoveryKubernetes:
		src, err := kubernetes.PeerSource(o.namespace, peer, o.network)
		if err != nil {
			return nil, fmt.Errorf("cannot build Kubernetes discovery for %s: %w", peer, err)
		}
		return src, nil
	}
	return nil, fmt.Errorf("%w %q (want static, dns or kubernetes)", ErrUnknownDiscovery, mode)
}

// TelemetryFlags registers --trace-ratio and --otlp-endpoint on fs and
// returns the telemetry.Config they fill (Service is set by the caller).
// After ParseFlags, pass it to telemetry.Setup.
func TelemetryFlags(fs *flag.FlagSet) *telemetry.Config {
	cfg := &telemetry.Config{}
	fs.Float64Var(&cfg.TraceRatio, "trace-ratio", 0,
		"share of new traces sampled at this service, 0..1 (requests arriving with a sampled W3C traceparent are always traced while an OTLP endpoint is set); 0 for load runs")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "",
		"OTLP/HTTP collector endpoint for traces, host:port (plain HTTP) or URL; empty disables tracing")
	return cfg
}
