package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/abm/provision"
)

// Store kinds (StoreConfig.Kind, StoreInfo.Kind).
const (
	// StoreAslite is the project's own stand-in, `chf aslite`.
	StoreAslite = "aslite"
	// StoreAsd is the real Aerospike server, started by local.
	StoreAsd = "asd"
	// StoreAerospike names a real Aerospike in StoreInfo: one local
	// started (StoreAsd) or an existing one (StoreConfig.External).
	StoreAerospike = "aerospike"
)

// MaxStoreNodes bounds StoreConfig.Nodes.
const MaxStoreNodes = 5

// DefaultNamespace is the Aerospike namespace of the accounts.
const DefaultNamespace = "chf"

// StoreConfig selects the store of a local CHF. The zero value starts
// aslite.
type StoreConfig struct {
	// Kind is StoreAslite (default) or StoreAsd.
	Kind string
	// External, when set, is an existing Aerospike's seed list
	// ("host:port,host:port"): no store is started, the ABM and the
	// provisioning use it (Kind must be aslite or empty).
	External string
	// Namespace of the accounts (default "chf"). aslite serves any.
	Namespace string
	// AsdBinary is the asd executable (Kind asd).
	AsdBinary string
	// Nodes is the number of asd nodes (1..MaxStoreNodes, default 1), a
	// mesh cluster on loopback with replication factor 2 when more than 1.
	Nodes int
	// Dir holds asd's configuration, work directories and logs (Kind asd;
	// required).
	Dir string
}

// StoreInfo says which store a local CHF uses.
type StoreInfo struct {
	Kind      string   // StoreAslite or StoreAerospike
	Hosts     []string // the seeds the ABM uses
	Namespace string
	// Build is the server's info "build" and "edition" (aslite answers
	// with its own version).
	Build string
	// Nodes is the number of asd nodes local started (0: aslite or an
	// external Aerospike); External marks a store local did not start.
	Nodes    int
	External bool
}

// validate checks s and fills its defaults.
func (s *StoreConfig) validate() error {
	if s.Kind == "" {
		s.Kind = StoreAslite
	}
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	switch {
	case s.Kind != StoreAslite && s.Kind != StoreAsd:
		return fmt.Errorf("%w: store %q: want aslite or asd", ErrConfig, s.Kind)
	case s.Nodes < 1 || s.Nodes > MaxStoreNodes:
		return fmt.Errorf("%w: store nodes %d: want 1..%d", ErrConfig, s.Nodes, MaxStoreNodes)
	case s.Nodes > 1 && s.Kind != StoreAsd:
		return fmt.Errorf("%w: store nodes %d: more than one node only with the asd store", ErrConfig, s.Nodes)
	case s.External != "" && s.Kind == StoreAsd:
		return fmt.Errorf("%w: an external Aerospike and a started asd exclude each other", ErrConfig)
	case s.Kind == StoreAsd && s.AsdBinary == "":
		return fmt.Errorf("%w: the asd store needs the asd binary", ErrConfig)
	case s.Kind == StoreAsd && s.Dir == "":
		return fmt.Errorf("%w: the asd store needs a directory", ErrConfig)
	}
	if s.External != "" {
		if _, err := provision.ParseHosts(s.External); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return nil
}

// ErrStoreUnreachable is wrapped by Start when the external Aerospike
// does not answer or lacks the namespace.
var ErrStoreUnreachable = errors.New("local: the Aerospike store (--aerospike) is unreachable")

// startStore starts the store (aslite or asd) or checks the external
// one, and sets c.seeds.
func (c *CHF) startStore(ctx context.Context) error {
	st := c.cfg.Store
	switch {
	case st.External != "":
		c.seeds = strings.Split(strings.ReplaceAll(st.External, " ", ""), ",")
		// Every wait has a deadline: the client's first connection.
		cl, err := c.dialStore(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStoreUnreachable, err)
		}
		defer cl.Close()
		nss, err := storeInfo(cl, "namespaces")
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrStoreUnreachable, st.External, err)
		}
		if !contains(strings.Split(nss, ";"), st.Namespace) {
			return fmt.Errorf("%w: %s has no namespace %q (it has %q)", ErrStoreUnreachable, st.External, st.Namespace, nss)
		}
		return nil
	case st.Kind == StoreAsd:
		rf := 1
		if st.Nodes > 1 {
			rf = 2
		}
		cl, err := asd.Start(ctx, asd.Options{
			Binary: st.AsdBinary, Dir: st.Dir, Nodes: st.Nodes, Namespace: st.Namespace,
			ReplicationFactor: rf, NsupPeriod: 120, Log: c.log,
		})
		if err != nil {
			return fmt.Errorf("cannot start asd (%s): %w", st.AsdBinary, err)
		}
		c.mu.Lock()
		c.asd = cl
		c.mu.Unlock()
		c.seeds = cl.Hosts()
		for i := range st.Nodes {
			c.log.Info("started", "service", c.storeNodeName(i), "pid", cl.Node(i).PID(), "addr", cl.Node(i).Host(), "dir", filepath.Join(st.Dir))
		}
		return nil
	default:
		c.seeds = []string{c.cfg.Aerospike}
		asArgs := []string{"--listen", c.cfg.Aerospike, "--namespace", st.Namespace}
		if c.cfg.AsliteDataDir != "" {
			asArgs = append(asArgs, "--data-dir", c.cfg.AsliteDataDir, "--commit", c.cfg.AsliteCommit)
		}
		return c.startService(ctx, "aslite", asArgs)
	}
}

// dialStore connects the official client to the store's seeds, within
// ctx's deadline (at most 10 s).
func (c *CHF) dialStore(ctx context.Context) (*as.Client, error) {
	hosts, err := provision.ParseHosts(strings.Join(c.seeds, ","))
	if err != nil {
		return nil, err
	}
	cp := as.NewClientPolicy()
	cp.Timeout = 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		cp.Timeout = max(time.Second, min(cp.Timeout, time.Until(d)))
	}
	cl, aerr := as.NewClientWithPolicyAndHost(cp, hosts...)
	if aerr != nil {
		return nil, fmt.Errorf("cannot connect to the Aerospike store at %s: %w", strings.Join(c.seeds, ","), aerr)
	}
	// Fill the connection pools first: against a cluster of several
	// nodes, concurrent batch writes on empty pools fail with
	// NO_AVAILABLE_CONNECTIONS_TO_NODE and then time out
	// (aerospike-client-go issue 447; seen with 3 asd nodes).
	if _, aerr := cl.WarmUp(0); aerr != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot open connections to the Aerospike store at %s: %w", strings.Join(c.seeds, ","), aerr)
	}
	return cl, nil
}

// storeInfo asks one node of the cluster for the info value name.
func storeInfo(cl *as.Client, name string) (string, error) {
	nodes := cl.GetNodes()
	if len(nodes) == 0 {
		return "", errors.New("no node of the cluster answers")
	}
	m, err := nodes[0].RequestInfo(as.NewInfoPolicy(), name)
	if err != nil {
		return "", fmt.Errorf("cannot read info %q: %w", name, err)
	}
	return m[name], nil
}

// readStoreInfo fills c.store once the store is up.
func (c *CHF) readStoreInfo(ctx context.Context) {
	st := c.cfg.Store
	c.store = StoreInfo{Kind: StoreAslite, Hosts: c.seeds, Namespace: st.Namespace}
	switch {
	case st.External != "":
		c.store.Kind, c.store.External = StoreAerospike, true
	case st.Kind == StoreAsd:
		c.store.Kind, c.store.Nodes = StoreAerospike, st.Nodes
	}
	cl, err := c.dialStore(ctx)
	if err != nil {
		c.log.Warn("cannot read the store's build", "err", err)
		return
	}
	defer cl.Close()
	var parts []string
	for _, k := range []string{"edition", "build"} {
		if v, err := storeInfo(cl, k); err == nil && v != "" {
			parts = append(parts, v)
		}
	}
	if c.store.Kind == StoreAslite {
		parts = []string{"aslite"}
		if v, err := storeInfo(cl, "build"); err == nil {
			parts = append(parts, v)
		}
	}
	c.store.Build = strings.Join(parts, " ")
}

// Store says which store the CHF uses.
func (c *CHF) Store() StoreInfo { return c.store }

// storeNodeName is the instance name of asd node i: "asd" for the only
// one, else "asd0", "asd1", ...
func (c *CHF) storeNodeName(i int) string {
	if c.cfg.Store.Nodes <= 1 {
		return "asd"
	}
	return "asd" + strconv.Itoa(i)
}

// StoreNode returns the instance name and index of the asd node that
// target names: "asd" is node 0, "asdN" node N. ok is false when target
// names no asd node of this CHF.
func (c *CHF) StoreNode(target string) (name string, i int, ok bool) {
	if c.asd == nil || !strings.HasPrefix(target, "asd") {
		return "", 0, false
	}
	if target != "asd" {
		n, err := strconv.Atoi(strings.TrimPrefix(target, "asd"))
		if err != nil || n < 0 || n >= c.cfg.Store.Nodes {
			return "", 0, false
		}
		i = n
	}
	return c.storeNodeName(i), i, true
}

// MigrationsRemaining is the partitions the asd cluster still has to
// migrate (info migrate_partitions_remaining summed over the nodes that
// answer); an error without a started asd.
func (c *CHF) MigrationsRemaining(ctx context.Context) (int64, error) {
	if c.asd == nil {
		return 0, errors.New("cannot read migrations: no asd started")
	}
	return c.asd.MigrationsRemaining(ctx)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// RepoRoot returns the root of this repository: the nearest directory
// upward from the working directory whose go.mod declares this module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot find the repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/chf-testbed/testbed\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root: no go.mod of github.com/chf-testbed/testbed above the working directory")
		}
		dir = parent
	}
}

// AsdBinary resolves the asd executable: explicit when given (it must
// exist), else asd.DefaultBinary of the repository root
// (../shared/aerospike/asd). Errors name the flag --asd-binary.
func AsdBinary(explicit string) (string, error) {
	if explicit != "" {
		fi, err := os.Stat(explicit)
		if err != nil {
			return "", fmt.Errorf("invalid --asd-binary: %w", err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("invalid --asd-binary: %s is not an executable file", explicit)
		}
		return filepath.Abs(explicit)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("invalid --asd-binary: none given and %w", err)
	}
	bin, err := asd.DefaultBinary(root)
	if err != nil {
		return "", fmt.Errorf("invalid --asd-binary: none given and no default: %w", err)
	}
	return bin, nil
}
