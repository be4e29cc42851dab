package abm

import (
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/service"
)

// TestServiceConfigCacheFlags: --account-cache and --account-cache-age
// reach the service's Config, and bad values are refused naming the flag.
func TestServiceConfigCacheFlags(t *testing.T) {
	parse := func(args ...string) (ServiceConfig, error) {
		c := DefaultServiceConfig()
		_, err := service.ParseCommand("chf abm", About, &c, args)
		return c, err
	}
	c, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.config(nil); cfg.AccountCache != 1<<16 || cfg.AccountCacheAge != 10*time.Second {
		t.Errorf("defaults: cache %d, age %v", cfg.AccountCache, cfg.AccountCacheAge)
	}
	c, err = parse("--account-cache", "2097152", "--account-cache-age", "2m")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.config(nil); cfg.AccountCache != 2097152 || cfg.AccountCacheAge != 2*time.Minute {
		t.Errorf("cache %d, age %v", cfg.AccountCache, cfg.AccountCacheAge)
	}
	if c, _ := parse("--account-cache", "0"); c.config(nil).AccountCache >= 0 {
		t.Errorf("--account-cache 0: Config.AccountCache %d, want negative (off)", c.config(nil).AccountCache)
	}
	for _, bad := range [][]string{{"--account-cache-age", "0s"}, {"--account-cache-age", "-1s"}, {"--account-cache-age", "25h"},
		{"--notify-queue", "0"}, {"--notify-queue", "999999999999"}, {"--reservation-sweep", "-1s"}, {"--max-inflight", "0"}} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: err %v, want one naming %s", bad, err, bad[0])
		}
	}
}
