package discovery

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
)

// Discovery modes built into this package (the --discovery flag). The
// Kubernetes mode, "kubernetes", registers itself from the
// chassis/discovery/kubernetes package, so only the binaries that import
// it link client-go.
const (
	ModeStatic = "static"
	ModeDNS    = "dns"
)

// ErrUnknownMode is returned by New for a mode no package registered.
var ErrUnknownMode = errors.New("discovery: unknown mode")

// Options is what a mode may need beyond the peer's address.
type Options struct {
	// Namespace is the Kubernetes namespace of the peer service
	// (--k8s-namespace); empty means the source's default ($POD_NAMESPACE).
	Namespace string
	// Network is the Multus network whose pod addresses are used instead
	// of the pod IP (--network); empty means the pod IP.
	Network string
}

// Builder builds the Source of one peer from the value of its peer flag
// (its form depends on the mode).
type Builder func(peer string, o Options) (Source, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Builder{}
)

// Register makes a mode available to New. It is meant to be called from
// an init function; registering a mode twice panics.
func Register(mode string, b Builder) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[mode]; dup || mode == "" || b == nil {
		panic(fmt.Sprintf("BUG: discovery mode %q registered twice, empty or nil", mode))
	}
	registry[mode] = b
}

// Modes returns the registered modes, sorted.
func Modes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	modes := make([]string, 0, len(registry))
	for m := range registry {
		modes = append(modes, m)
	}
	slices.Sort(modes)
	return modes
}

// New builds the Source of peer with the mode registered as mode (empty
// means static):
//   - static: a comma-separated host:port list;
//   - dns: host:port of a headless service, re-resolved every 5 s (A/AAAA
//     records; a "_service._proto.name" host resolves SRV records instead);
//   - kubernetes (when linked in): service name[:port] in o.Namespace.
func New(mode, peer string, o Options) (Source, error) {
	if mode == "" {
		mode = ModeStatic
	}
	peer = strings.TrimSpace(peer)
	if peer == "" {
		return nil, fmt.Errorf("discovery: peer address is empty for --discovery=%s", mode)
	}
	registryMu.RLock()
	b := registry[mode]
	registryMu.RUnlock()
	if b == nil {
		return nil, fmt.Errorf("%w %q (this binary offers %s)", ErrUnknownMode, mode, strings.Join(Modes(), ", "))
	}
	return b(peer, o)
}

func init() {
	Register(ModeStatic, func(peer string, _ Options) (Source, error) {
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
			return nil, fmt.Errorf("cannot parse static peer %q: %w", peer, ErrNoAddresses)
		}
		return Static(addrs...), nil
	})
	Register(ModeDNS, func(peer string, _ Options) (Source, error) {
		return DNS(peer, DNSConfig{})
	})
}
