package aslitecmd

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/aslite"
)

// TestServiceConfigDurabilityFlags: --data-dir, --commit and
// --commit-interval reach the server's Config, and bad values are
// refused naming the flag.
func TestServiceConfigDurabilityFlags(t *testing.T) {
	parse := func(args ...string) (ServiceConfig, error) {
		t.Helper()
		c := DefaultServiceConfig()
		fs := flag.NewFlagSet("aslite", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return c, c.Validate()
	}
	dir := t.TempDir()
	c, err := parse("--data-dir", dir, "--commit", "interval", "--commit-interval", "250ms", "--idle-timeout", "1m")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.config(nil)
	if cfg.DataDir != dir || cfg.Commit != aslite.CommitInterval || cfg.CommitInterval != 250*time.Millisecond || cfg.IdleTimeout != time.Minute {
		t.Errorf("config %+v", cfg)
	}
	if c, _ := parse(); c.config(nil).DataDir != "" || c.Commit != "sync" {
		t.Errorf("defaults: %+v", c)
	}
	for _, bad := range [][]string{{"--commit", "always"}, {"--commit-interval", "0s"}, {"--write-timeout", "-1s"}} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: err %v, want one naming %s", bad, err, bad[0])
		}
	}
}
