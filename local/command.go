package local

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/chassis/service"
)

// About is the help text of the local command.
const About = `Starts aslite, abm, ocp and cgw as separate processes on loopback, provisions the
accounts, prints the Nchf and balance URLs once ready, and stops every process on
SIGINT/SIGTERM. Exits non-zero with the error of a service that dies early.`

// CommandConfig is the configuration of the local command (`chf local`):
// one field per flag. Start from DefaultCommandConfig.
type CommandConfig struct {
	Nchf, Diameter         string
	OCP, ABM, AsliteListen string
	// Aerospike is an existing Aerospike's seeds (no store started);
	// Namespace its namespace; Store, AsdBinary, StoreNodes and StoreDir
	// start the real server instead of aslite.
	Aerospike, Namespace      string
	Store, AsdBinary          string
	StoreNodes                int
	StoreDir                  string
	Accounts                  int
	Balance                   int64
	First                     string
	CGWArgs, OCPArgs, ABMArgs string
	AsliteArgs                string
	CDRDir                    string
	// Replicas is "service=n,..." (cgw, ocp, abm); AsliteDataDir and
	// AsliteCommit make aslite durable.
	Replicas                    string
	AsliteDataDir, AsliteCommit string
	Quiet                       bool
	TLSDir                      string
	LogLevel                    slog.Level
	// GOMAXPROCS is each service's --gomaxprocs (Config.GOMAXPROCS).
	GOMAXPROCS int
	// RuntimeProfile is each service's --runtime-profile
	// (Config.RuntimeProfile).
	RuntimeProfile sched.Profile
}

// DefaultCommandConfig returns the defaults of the local flags.
func DefaultCommandConfig() CommandConfig {
	return CommandConfig{Nchf: DefaultNchf, Accounts: DefaultAccounts, Balance: DefaultBalance, First: DefaultFirst, AsliteCommit: "sync",
		Namespace: DefaultNamespace, Store: StoreAslite, StoreNodes: 1}
}

// RegisterFlags registers the local flags, c's values as defaults.
func (c *CommandConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Nchf, "nchf", c.Nchf, "host:port of the CGW (Nchf over h2c and HTTP/1.1, balance inquiry); port 0 = any free port")
	fs.StringVar(&c.Diameter, "diameter", c.Diameter, "host:port for the CGW's Diameter Gy front; empty = off")
	fs.IntVar(&c.Accounts, "accounts", c.Accounts, "accounts to provision, from --first upward")
	fs.Int64Var(&c.Balance, "balance", c.Balance, "balance of each provisioned account, in minor units")
	fs.StringVar(&c.First, "first", c.First, "first SUPI to provision")
	fs.StringVar(&c.OCP, "ocp", c.OCP, "host:port for the OCP; empty = a free loopback port")
	fs.StringVar(&c.ABM, "abm", c.ABM, "host:port for the ABM; empty = a free loopback port")
	fs.StringVar(&c.AsliteListen, "aslite-listen", c.AsliteListen, "host:port for aslite; empty = a free loopback port")
	RegisterStoreFlags(fs, &c.Aerospike, &c.Namespace, &c.Store, &c.AsdBinary, &c.StoreNodes)
	fs.StringVar(&c.StoreDir, "store-dir", c.StoreDir, "with --store asd: the directory of asd's configuration, data and logs (a node<i>/ each); empty = a temporary directory, removed at the end")
	fs.StringVar(&c.CGWArgs, "cgw-args", c.CGWArgs, "extra flags for the cgw process, space-separated (e.g. \"--pprof 127.0.0.1:6060\")")
	fs.StringVar(&c.OCPArgs, "ocp-args", c.OCPArgs, "extra flags for the ocp process, space-separated")
	fs.StringVar(&c.ABMArgs, "abm-args", c.ABMArgs, "extra flags for the abm process, space-separated")
	fs.StringVar(&c.AsliteArgs, "aslite-args", c.AsliteArgs, "extra flags for the aslite process, space-separated (e.g. \"--flight-recorder DIR\")")
	fs.StringVar(&c.CDRDir, "cdr-dir", c.CDRDir, "directory the OCP writes CHF-CDR files to (its --cdr-dir; other --cdr-* flags through --ocp-args); empty = no CDRs")
	fs.StringVar(&c.Replicas, "replicas", c.Replicas, "instances per service, e.g. \"ocp=2,abm=2\" (cgw, ocp, abm; 1..16 each; default 1): the first on its address flag, the others on free loopback ports, every caller given the whole list (static discovery)")
	fs.StringVar(&c.AsliteDataDir, "aslite-data-dir", c.AsliteDataDir, "directory where aslite keeps its log and snapshots (chf aslite --data-dir), so balances survive a restart or kill -9; empty = in memory")
	fs.StringVar(&c.AsliteCommit, "aslite-commit", c.AsliteCommit, "with --aslite-data-dir, aslite's --commit: sync (acknowledge after fsync) or interval")
	fs.StringVar(&c.TLSDir, "tls-dir", c.TLSDir, "run every service over TLS, mTLS between them and on Nchf, with ca.pem, tls.crt and tls.key from this directory (a throwaway CA and certificate for 127.0.0.1 are made there when it has no ca.pem); the loadgen then needs --ca DIR/ca.pem --cert DIR/tls.crt --key DIR/tls.key; empty = cleartext")
	fs.IntVar(&c.GOMAXPROCS, "gomaxprocs", c.GOMAXPROCS, "each service process's --gomaxprocs; 0 = its share of this box, max(1, CPUs / service processes), as a pod's CPU limit would size it (1 for the four processes on 2 CPUs); -1 = Go's default (one P per CPU in every process); a --cgw-args/--ocp-args/--abm-args --gomaxprocs overrides it for that service")
	fs.Var(&c.RuntimeProfile, sched.FlagName, "each service process's --runtime-profile: production (Go's and the kernel's scheduler defaults) or lab (SCHED_BATCH and Go's sysmon kept awake: workarounds for machines with expensive thread wake-ups; chassis/README.md); a --cgw-args/--ocp-args/--abm-args/--aslite-args --runtime-profile overrides it for that service")
	fs.BoolVar(&c.Quiet, "quiet", c.Quiet, "do not copy the services' logs to stderr")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "log level of the runner: debug, info, warn or error")
}

// Validate checks the flags' values.
func (c *CommandConfig) Validate() error {
	if c.Accounts < 0 {
		return errors.New("cannot use --accounts: must not be negative")
	}
	if _, err := ParseReplicas(c.Replicas); err != nil {
		return fmt.Errorf("cannot use --replicas: %w", err)
	}
	if c.AsliteCommit != "sync" && c.AsliteCommit != "interval" {
		return fmt.Errorf("cannot use --aslite-commit %q: want sync or interval", c.AsliteCommit)
	}
	bin, err := CheckStoreFlags(c.Aerospike, c.Namespace, c.Store, c.AsdBinary, c.StoreNodes)
	if err != nil {
		return err
	}
	c.AsdBinary = bin
	if c.AsliteDataDir != "" && (c.Store != StoreAslite || c.Aerospike != "") {
		return errors.New("cannot use --aslite-data-dir: aslite does not run with --store asd or --aerospike")
	}
	return nil
}

// RegisterStoreFlags registers the store flags every command that starts
// a local CHF shares: --aerospike and --as-namespace (named as the
// abm's and chf provision's), --store, --asd-binary and --store-nodes.
func RegisterStoreFlags(fs *flag.FlagSet, aerospike, namespace, store, asdBinary *string, nodes *int) {
	fs.StringVar(aerospike, "aerospike", *aerospike, "use an existing Aerospike, its seeds as host:port[,host:port...], instead of starting a store: the ABM and the provisioning use it (its namespace must exist; the accounts of the range are overwritten)")
	fs.StringVar(namespace, "as-namespace", *namespace, "Aerospike namespace of the accounts")
	fs.StringVar(store, "store", *store, "the store started for the CHF: aslite (the project's stand-in) or asd (the real Aerospike server, --asd-binary)")
	fs.StringVar(asdBinary, "asd-binary", *asdBinary, "with --store asd: the Aerospike server executable; empty = ../shared/aerospike/asd relative to the repository root")
	fs.IntVar(nodes, "store-nodes", *nodes, "with --store asd: nodes of the Aerospike cluster, 1..5; more than 1 = a mesh cluster on loopback with replication factor 2")
}

// CheckStoreFlags checks the store flags, naming the flag at fault, and
// returns the asd binary to use (empty unless --store asd).
func CheckStoreFlags(aerospike, namespace, store, asdBinary string, nodes int) (string, error) {
	switch {
	case store != StoreAslite && store != StoreAsd:
		return "", fmt.Errorf("invalid --store %q: want aslite or asd", store)
	case nodes < 1 || nodes > MaxStoreNodes:
		return "", fmt.Errorf("invalid --store-nodes %d: want 1..%d", nodes, MaxStoreNodes)
	case nodes > 1 && store != StoreAsd:
		return "", fmt.Errorf("invalid --store-nodes %d: more than one node needs --store asd (aslite is one process)", nodes)
	case aerospike != "" && store == StoreAsd:
		return "", errors.New("invalid --aerospike: an existing Aerospike and --store asd exclude each other")
	case namespace == "":
		return "", errors.New("invalid --as-namespace: empty")
	}
	if aerospike != "" {
		if _, err := provision.ParseHosts(aerospike); err != nil {
			return "", fmt.Errorf("invalid --aerospike: %w", err)
		}
	}
	if store != StoreAsd {
		if asdBinary != "" {
			return "", errors.New("invalid --asd-binary: only with --store asd")
		}
		return "", nil
	}
	return AsdBinary(asdBinary)
}

// ParseReplicas parses "service=n,..." (cgw, ocp or abm; n 1..16).
func ParseReplicas(s string) (map[string]int, error) {
	m := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		switch {
		case !ok || err != nil:
			return nil, fmt.Errorf("%w: %q: want service=count", ErrConfig, kv)
		case k != "cgw" && k != "ocp" && k != "abm":
			return nil, fmt.Errorf("%w: %q: service must be cgw, ocp or abm", ErrConfig, kv)
		case n < 1 || n > 16:
			return nil, fmt.Errorf("%w: %q: count must be 1..16", ErrConfig, kv)
		}
		m[k] = n
	}
	return m, nil
}

// String is the configuration as name=value pairs of its flags.
func (c CommandConfig) String() string { return service.ConfigString(&c) }

// Config returns the Config of Start for c.
func (c *CommandConfig) Config(log *slog.Logger) Config {
	cfg := Config{
		Nchf: c.Nchf, Diameter: c.Diameter, OCP: c.OCP, ABM: c.ABM, Aerospike: c.AsliteListen,
		Store:    StoreConfig{Kind: c.Store, External: c.Aerospike, Namespace: c.Namespace, AsdBinary: c.AsdBinary, Nodes: c.StoreNodes, Dir: c.StoreDir},
		Accounts: c.Accounts, Balance: c.Balance, First: c.First, Logger: log, TLSDir: c.TLSDir,
		AsliteDataDir: c.AsliteDataDir, AsliteCommit: c.AsliteCommit,
		Args:   map[string][]string{"cgw": strings.Fields(c.CGWArgs), "ocp": strings.Fields(c.OCPArgs), "abm": strings.Fields(c.ABMArgs), "aslite": strings.Fields(c.AsliteArgs)},
		CDRDir: c.CDRDir, GOMAXPROCS: c.GOMAXPROCS, RuntimeProfile: c.RuntimeProfile,
	}
	cfg.Replicas, _ = ParseReplicas(c.Replicas) // Validate checked it
	if c.Accounts == 0 {
		cfg.Accounts = -1
	}
	if c.Quiet {
		cfg.Logs = io.Discard
	}
	return cfg
}

// Run starts a local CHF as c says, prints its addresses once ready and
// runs it until SIGINT or SIGTERM (then stops it) or until a service dies
// (then returns its error).
func (c *CommandConfig) Run() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel})).With("service", "local")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := c.Config(log)
	if cfg.Store.Kind == StoreAsd && cfg.Store.Dir == "" {
		dir, err := os.MkdirTemp("", "chf-local-asd-")
		if err != nil {
			return fmt.Errorf("cannot create a directory for asd: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Store.Dir = dir
	}
	chf, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	st := chf.Store()
	fmt.Printf("chf local store: %s %s namespace %s (%s)\n", st.Kind, strings.Join(st.Hosts, ","), st.Namespace, st.Build)
	if d := chf.Addrs["diameter"]; d != "" {
		fmt.Printf("chf local ready: nchf %s balance %s{supi} diameter %s pids %v\n", chf.NchfURL, chf.BalanceURL, d, chf.Pids())
	} else {
		fmt.Printf("chf local ready: nchf %s balance %s{supi} pids %v\n", chf.NchfURL, chf.BalanceURL, chf.Pids())
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
		start := time.Now()
		err := chf.Stop()
		log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
		return err
	case <-chf.Done():
		chf.Stop()
		return chf.Err()
	}
}
