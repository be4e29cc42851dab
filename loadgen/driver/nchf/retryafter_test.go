package nchf

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"Sun, 06 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sun, 06 Dec 2026 11:00:00 GMT", 0, true}, // in the past: no wait
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999999", 0, false},
	} {
		got, ok := ParseRetryAfter([]byte(c.in), now)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// Every transport reports a 503's Retry-After in the outcome, for the
// engine's retry.
func TestShedRetryAfter(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 1, Balance: 100, Shed: func() bool { return true }, RetryAfter: "7"})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	for _, proto := range []string{"h2c", "h2c-async", "http1", "h2c-std"} {
		t.Run(proto, func(t *testing.T) {
			d, err := New(driver.Config{Proto: proto, Targets: []string{fake.Addr()}, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			w, err := d.NewWorker()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			c := driver.Charge{Op: driver.ChargeEvent, SUPI: []byte("imsi-001010000000001"), RatingGroup: 30, Request: true}
			var o driver.Outcome
			done := false
			if err := w.Queue(&c, &o, func(error) { done = true }); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			for deadline := time.Now().Add(5 * time.Second); !done; {
				if time.Now().After(deadline) {
					t.Fatal("no outcome")
				}
				w.Poll(10 * time.Millisecond)
			}
			if o.Class != "http_503" || !o.Shed || !o.Resolved || o.RetryAfter != 7*time.Second {
				t.Fatalf("outcome %+v: want a shed with Retry-After 7s", o)
			}
		})
	}
}
