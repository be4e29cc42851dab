package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/tariff"
)

// configurable is what every command's configuration type offers.
type configurable interface {
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
}

// validate registers cfg's flags, parses args and validates cfg.
func validate(t *testing.T, cfg configurable, args ...string) error {
	t.Helper()
	fs := newFlagSet("test")
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("cannot parse %q: %v", args, err)
	}
	return cfg.Validate()
}

// wantUsage checks that err is a usage error (exit 2) naming want.
func wantUsage(t *testing.T, args []string, err error, want string) {
	t.Helper()
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate after %q: exit %d, %v; want exit 2 naming %q", args, code, err, want)
	}
}

// A valid tariff file for --tariff-change.
func tariffFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tariff.yaml")
	if err := os.WriteFile(p, []byte(tariff.DefaultFile), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLocalConfigValidate(t *testing.T) {
	change := "1s:" + tariffFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--accounts", "0"}, "--accounts"},
		{[]string{"--balance", "-1"}, "--balance"},
		{[]string{"--accounts", "10", "--subscribers", "11"}, "--subscribers"},
		{[]string{"--replicas", "bogus"}, "--replicas"},
		{[]string{"--aslite-commit", "never"}, "--aslite-commit"},
		{[]string{"--aerospike", "127.0.0.1:3000", "--aslite-data-dir", "x"}, "--aslite-data-dir"},
		{[]string{"--fault", "bogus"}, "--fault"},
		{[]string{"--fault", "kill:asd:1s"}, "--fault kill:asd:1s"},
		{[]string{"--fault", "kill:ocp:1s", "--fault-validity", "10ms"}, "--fault-validity"},
		{[]string{"--sample-every", "10ms"}, "--sample-every"},
		{[]string{"--tariff-change", "soon"}, "--tariff-change"},
		{[]string{"--tariff-change", "1s:" + filepath.Join(t.TempDir(), "missing.yaml")}, "--tariff-change"},
		{[]string{"--tariff-change", change, "--fault", "kill:ocp:1s"}, "--tariff-change"},
		// --ocp-args --tariff is refused with --tariff-change however it is spelt.
		{[]string{"--tariff-change", change, "--ocp-args", "--tariff=x.yaml"}, "--ocp-args --tariff"},
		{[]string{"--tariff-change", change, "--ocp-args", "-tariff x.yaml"}, "--ocp-args --tariff"},
		{[]string{"--tariff-change", change, "--ocp-args", "--tariff x.yaml"}, "--ocp-args --tariff"},
		{[]string{"--ocp-args", "stray"}, "--ocp-args"},
		{[]string{"--abm-args", "--reservation-sweep=1s soon"}, "--abm-args"},
		{[]string{"--cgw-args", "stray"}, "--cgw-args"},
	} {
		cfg := DefaultLocalConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	// Valid: the defaults that depend on other flags are set, the
	// services' extra flags resolved.
	cfg := DefaultLocalConfig()
	if err := validate(t, &cfg, "--results", "r", "--tariff-change", change, "--abm-args", "-reservation-sweep=2s", "--accounts", "10"); err != nil {
		t.Fatal(err)
	}
	if cfg.run.rate != 1000 || !strings.HasPrefix(cfg.run.outDir, "r"+string(filepath.Separator)) || cfg.change == nil || !cfg.abm.has("reservation-sweep") || cfg.run.subscribers != 10 {
		t.Errorf("resolved config: rate %v, out %q, change %v, abm %v, subscribers %d", cfg.run.rate, cfg.run.outDir, cfg.change, cfg.abm, cfg.run.subscribers)
	}
	// A fault run without a tariff writes one; with --ocp-args -tariff it does not.
	for _, c := range []struct {
		ocp  string
		want bool
	}{{"", true}, {"-tariff t.yaml", false}, {"--tariff=t.yaml", false}, {"--max-inflight 5", true}} {
		cfg := DefaultLocalConfig()
		if err := validate(t, &cfg, "--fault", "kill:ocp:1s", "--ocp-args", c.ocp); err != nil {
			t.Fatal(err)
		}
		if got := cfg.writesFaultTariff(); got != c.want {
			t.Errorf("--ocp-args %q: writesFaultTariff %v, want %v", c.ocp, got, c.want)
		}
	}
}

func TestSweepConfigValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--local", "--start", "0"}, "--start"},
		{[]string{"--local", "--max-steal", "-1"}, "--max-steal"},
		{[]string{"--local", "--slo-late-rate", "2"}, "--slo-late-rate"},
		{[]string{"--local", "--target", "http://127.0.0.1:1"}, "--target and --local"},
		{nil, "--target and --local"},
		{[]string{"--target", "http://127.0.0.1:1", "--cdr-dir", "x"}, "--cdr-dir"},
		{[]string{"--target", "http://127.0.0.1:1", "--store", "asd"}, "--store"},
		{[]string{"--target", "ftp://x"}, "--target"},
		{[]string{"--local", "--rate", "5"}, "--rate"},
		{[]string{"--local", "--workers", "-1"}, "--workers"},
	} {
		cfg := DefaultSweepConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	cfg := DefaultSweepConfig()
	if err := validate(t, &cfg, "--target", "http://127.0.0.1:1", "--start", "200"); err != nil {
		t.Fatal(err)
	}
	if cfg.run.duration.String() != "10s" || cfg.run.rate != 200 || !cfg.run.noDefThresh || len(cfg.targets) != 1 {
		t.Errorf("resolved config: duration %s, rate %v, no default thresholds %v, targets %v", cfg.run.duration, cfg.run.rate, cfg.run.noDefThresh, cfg.targets)
	}
}

func TestGateConfigValidate(t *testing.T) {
	trials := []string{"--baseline-chf", "a", "--candidate-chf", "b"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tolerance", "0"}, "--tolerance"},
		{[]string{"--confidence", "1"}, "--confidence"},
		{[]string{"--max-p99", "-1ms"}, "--max-p99"},
		{nil, "--baseline-files"},
		{append([]string{"--trials", "0"}, trials...), "--trials"},
		{append([]string{"--unpaired"}, trials...), "--unpaired"},
		{append([]string{"--accounts", "0"}, trials...), "--accounts"},
		{append([]string{"--balance", "0"}, trials...), "--balance"},
	} {
		cfg := DefaultGateConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	cfg := DefaultGateConfig()
	if err := validate(t, &cfg, trials...); err != nil {
		t.Fatal(err)
	}
	if cfg.run.rate != 1000 || cfg.run.duration.String() != "10s" || cfg.run.outDir == "" {
		t.Errorf("resolved config: rate %v, duration %s, out %q", cfg.run.rate, cfg.run.duration, cfg.run.outDir)
	}
}

func TestLabConfigValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pin", "sometimes"}, "--pin"},
		{[]string{"--baseline", "host,half"}, "--baseline"},
		{[]string{"--aerospike", "127.0.0.1:3000"}, "--aerospike"},
		{[]string{"--as-namespace", "other"}, "--as-namespace"},
		{[]string{"--accounts", "999999999999"}, "--accounts"},
	} {
		cfg := DefaultLabConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	cfg := DefaultLabConfig()
	if err := validate(t, &cfg, "--pin", "off", "--models", "host, baremetal"); err != nil {
		t.Fatal(err)
	}
	if o := cfg.options; len(o.Pin) != 1 || o.Pin[0] || len(o.Models) != 2 || o.Out == "" || !o.BaselinePinned {
		t.Errorf("resolved options: pin %v, models %v, out %q, baseline pinned %v", o.Pin, o.Models, o.Out, o.BaselinePinned)
	}
}

func TestCheckMoneyConfigValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", "explode"}, "--faults"},
		{[]string{"--avoid", "no-such-defect"}, "--avoid"},
		{[]string{"--cdr", "maybe"}, "--cdr"},
		{[]string{"--ops", "-1"}, "--ops"},
		{[]string{"--duration", "0"}, "--duration"},
		{[]string{"--accounts", "65"}, "--accounts"},
		{[]string{"--balance", "0"}, "--balance"},
		{[]string{"--rate", "501"}, "--rate"},
		{[]string{"--fault-interval", "1ms"}, "--fault-interval"},
	} {
		cfg := DefaultCheckMoneyConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	cfg := DefaultCheckMoneyConfig()
	if err := validate(t, &cfg, "--faults", "off", "--avoid", "open"); err != nil {
		t.Fatal(err)
	}
}

func TestRunConfigValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--target"},
		{[]string{"--target", "http://"}, "--target"},
		{[]string{"--target", "http://127.0.0.1:1", "--start-at", "later"}, "--start-at"},
		{[]string{"--target", "http://127.0.0.1:1", "--conns", "-1"}, "--conns"},
		{[]string{"--target", "diameter://127.0.0.1:1", "--proto", "http1"}, "--proto"},
	} {
		cfg := DefaultRunConfig()
		wantUsage(t, c.args, validate(t, &cfg, c.args...), c.want)
	}
	cfg := DefaultRunConfig()
	if err := validate(t, &cfg, "--target", "diameter://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if cfg.run.proto != "gy" || len(cfg.targets) != 1 {
		t.Errorf("resolved config: proto %s, targets %v", cfg.run.proto, cfg.targets)
	}
}

// TestHotSlice: a sweep whose top step would send each subscriber of an
// attempt's slice more than hotSubscriberTPS requests a second says so,
// with the slice and what to raise; a large enough range says nothing.
func TestHotSlice(t *testing.T) {
	for _, c := range []struct {
		max       float64
		subs, att int
		want      string
	}{
		{32000, 100_000, 67, "slice of 1492 subscribers (100000 over 67 attempts), so the top step (32000 TPS) sends each subscriber 21 requests a second"},
		{40000, 20_000, 130, "sends each subscriber 261 requests a second"},
		{32000, 1_000_000, 67, ""},
		{20000, 1_000_000, 45, ""},
		{10, 1, 1, "give at least 2"},
		{1000, 0, 0, ""}, // no slice: the caller's usage error, not a note
	} {
		got := hotSlice(c.max, c.subs, c.att)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("hotSlice(%v, %d, %d) = %q, want %q", c.max, c.subs, c.att, got, c.want)
		}
		if got != "" && !strings.Contains(got, "--accounts") {
			t.Errorf("hotSlice note names no flag: %q", got)
		}
	}
}

// TestBenchSweepAccounts: loadgen bench's sweep provisions enough accounts
// that no attempt's slice is hot at the top step, and keeps --accounts
// when that is already enough.
func TestBenchSweepAccounts(t *testing.T) {
	for _, c := range []struct {
		max      float64
		accounts int
	}{{32000, 100_000}, {20000, 100_000}, {2000, 100_000}, {32000, 50_000_000}} {
		b := DefaultBenchConfig()
		b.sweepMax, b.accounts, b.outDir = c.max, c.accounts, t.TempDir()
		cfg, err := b.sweepConfig()
		if err != nil {
			t.Fatal(err)
		}
		got, attempts := cfg.chf.accounts, cfg.sweep.Attempts()
		if n := hotSlice(c.max, got, attempts); n != "" || got < c.accounts {
			t.Errorf("--sweep-max %v --accounts %d: the sweep provisions %d for %d attempts: %s", c.max, c.accounts, got, attempts, n)
		}
		if need := sweepAccounts(c.max, attempts); got != max(c.accounts, need) {
			t.Errorf("--sweep-max %v --accounts %d: %d accounts, want max(%d, %d)", c.max, c.accounts, got, c.accounts, need)
		}
	}
}
