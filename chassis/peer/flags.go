package peer

import (
	"flag"
	"fmt"
	"strings"

	"github.com/chf-testbed/testbed/chassis/discovery"
)

// Flags are how a service finds one peer service: --<Name> (its address, in
// the form the mode wants), --discovery (a mode registered with
// chassis/discovery), --k8s-namespace and --network.
type Flags struct {
	// Name is the peer service ("ocp") and its flag (not a flag itself).
	Name      string
	Addr      string
	Discovery string
	Namespace string
	Network   string
}

// RegisterFlags registers the peer flags.
func (p *Flags) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&p.Discovery, "discovery", p.Discovery, fmt.Sprintf(
		"how to find the %s: static (--%s is a comma-separated host:port list), dns (--%s is host:port of a headless service) or kubernetes (--%s is service[:port])",
		strings.ToUpper(p.Name), p.Name, p.Name, p.Name))
	fs.StringVar(&p.Namespace, "k8s-namespace", p.Namespace, "Kubernetes namespace for --discovery=kubernetes (env also POD_NAMESPACE)")
	fs.StringVar(&p.Network, "network", p.Network, "Multus network whose addresses to use for peers; empty = the pod IP")
	fs.StringVar(&p.Addr, p.Name, p.Addr, fmt.Sprintf("the %s peer, in the form --discovery wants", strings.ToUpper(p.Name)))
}

// Source builds the peer's discovery source (nothing runs until the
// source's Run). Validate calls it too, so that --check-flags checks the
// peer flags as a start would.
func (p *Flags) Source() (discovery.Source, error) {
	src, err := discovery.New(p.Discovery, p.Addr, discovery.Options{Namespace: p.Namespace, Network: p.Network})
	if err != nil {
		return nil, fmt.Errorf("cannot use --%s with --discovery=%s: %w", p.Name, p.Discovery, err)
	}
	return src, nil
}
