package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/provision"
)

func TestProgressBar(t *testing.T) {
	f := func(done, total int, el time.Duration, want string) {
		t.Helper()
		if got := progressBar(done, total, el); got != want {
			t.Fatalf("progressBar(%d, %d, %s) = %q, want %q", done, total, el, got, want)
		}
	}
	f(0, 100, 0, "[..............................]   0% 0/100 accounts, 0/s, ? left")
	f(5_000_000, 20_000_000, 10*time.Second, "[#######.......................]  25% 5000000/20000000 accounts, 500000/s, 30s left")
	f(100, 100, time.Second, "[##############################] 100% 100/100 accounts, 100/s, 0s left")
}

// TestProvisionFlagBounds: values that would crash or exhaust memory
// (a batch of 10^12 records, 10^12 workers) are refused naming the flag.
func TestProvisionFlagBounds(t *testing.T) {
	base := func() provisionConfig {
		return provisionConfig{Aerospike: "127.0.0.1:3000", Config: provision.Config{
			Namespace: "chf", Count: 10, Balance: 1, First: "imsi-001010000000001", Currency: "EUR", Workers: 16, Batch: 256,
		}}
	}
	if c := base(); c.Validate() != nil {
		t.Fatalf("defaults refused: %v", c.Validate())
	}
	for _, c := range []struct {
		set  func(*provisionConfig)
		want string
	}{
		{func(c *provisionConfig) { c.Count = -1 }, "--accounts -1"},
		{func(c *provisionConfig) { c.Balance = -1 }, "--balance -1"},
		{func(c *provisionConfig) { c.Workers = 0 }, "--workers 0"},
		{func(c *provisionConfig) { c.Workers = 999999999999 }, "--workers 999999999999"},
		{func(c *provisionConfig) { c.Batch = 0 }, "--batch 0"},
		{func(c *provisionConfig) { c.Batch = 999999999999 }, "--batch 999999999999"},
		{func(c *provisionConfig) { c.CreditLimit = -1 }, "--credit-limit"},
	} {
		cfg := base()
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming it", c.want, err)
		}
	}
}
