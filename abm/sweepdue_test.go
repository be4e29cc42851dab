package abm

import (
	"context"
	"sync"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/chf"
)

// TestSweepDue: BinDue is the first time account.expire would change the
// account, 0 when a notification is due now, DueNever when nothing will
// expire.
func TestSweepDue(t *testing.T) {
	res := func(exp int64) reservation { return reservation{rg: 1, amount: 1, expires: exp} }
	bres := func(exp int64, bunits uint64) reservation {
		return reservation{rg: 1, expires: exp, bunits: bunits, svc: chf.ServiceData}
	}
	cases := []struct {
		name string
		acc  account
		want int64
	}{
		{"empty", account{}, DueNever},
		{"an open session's reservations: the first", account{sessions: []session{{expires: 1000, res: []reservation{res(100), res(50)}}}}, 50},
		{"a session without reservations: its own expiry", account{sessions: []session{{expires: 70}, {expires: 1000, res: []reservation{res(90)}}}}, 70},
		{"reservations due before the session", account{sessions: []session{{expires: 30, res: []reservation{res(80)}}}}, 80},
		{"an answer kept for retries", account{recent: []recent{{expires: 40}}, sessions: []session{{expires: 500}}}, 40},
		{"a bucket with a validity", account{buckets: []bucket{{svc: chf.ServiceData, units: 5, expires: 30}, {svc: chf.ServiceSMS, units: 5}}}, 30},
		{"a bucket without one", account{buckets: []bucket{{svc: chf.ServiceData, units: 5}}}, DueNever},
		{"a spent bucket", account{buckets: []bucket{{svc: chf.ServiceData, units: 0, expires: 900}}}, 0},
		{"held beyond the live buckets, notifiable", account{
			buckets:  []bucket{{svc: chf.ServiceData, units: 5}},
			sessions: []session{{expires: 600, notify: []byte("http://smf/a"), res: []reservation{bres(300, 10)}}},
		}, 0},
		{"held beyond the live buckets, no notifyUri", account{
			buckets:  []bucket{{svc: chf.ServiceData, units: 5}},
			sessions: []session{{expires: 600, res: []reservation{bres(300, 10)}}},
		}, 300},
		{"held within the live buckets", account{
			buckets:  []bucket{{svc: chf.ServiceData, units: 50}},
			sessions: []session{{expires: 600, notify: []byte("http://smf/a"), res: []reservation{bres(300, 10)}}},
		}, 300},
	}
	for _, c := range cases {
		if got := c.acc.sweepDue(); got != c.want {
			t.Errorf("%s: sweepDue = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestSweepReadsOnlyDue: the sweep's scan returns only the accounts with
// something due; every write sets BinDue, and removes it once nothing is
// pending; provisioning stores none for an account with nothing pending.
func TestSweepReadsOnlyDue(t *testing.T) {
	cl := startStore(t)
	clk := newFakeClock()
	svc := New(cl, Config{Now: clk.Now})
	const n = 20
	provisionAccounts(t, cl, "imsi-001010000000001", n, 1000)
	ctx := context.Background()
	due := func(supi string) any {
		t.Helper()
		k, err := as.NewKey(svc.cfg.Namespace, svc.cfg.Set, supi)
		if err != nil {
			t.Fatal(err)
		}
		rec, aerr := cl.Get(nil, k, BinDue)
		if aerr != nil {
			t.Fatal(aerr)
		}
		return rec.Bins[BinDue]
	}
	if got := due("imsi-001010000000005"); got != nil {
		t.Fatalf("provisioned: %s = %v, want none", BinDue, got)
	}
	sweep := func(wantRead, wantChanged int) {
		t.Helper()
		changed, err := svc.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if read := svc.sweep.lastCount.Load(); read != int64(wantRead) || changed != wantChanged {
			t.Fatalf("sweep read %d and changed %d accounts, want %d and %d", read, changed, wantRead, wantChanged)
		}
	}
	sweep(0, 0)
	var resp chf.ChargeResponse
	for _, supi := range []string{"imsi-001010000000002", "imsi-001010000000007", "imsi-001010000000011"} {
		req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: "s", Seq: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
		if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess || resp.Reserved == 0 {
			t.Fatalf("create on %s: %v %+v", supi, err, resp)
		}
	}
	now := clk.Now().Unix()
	if got := due("imsi-001010000000007"); got != int(now+60) {
		t.Fatalf("after a create: %s = %v, want %d (the reservation's validity)", BinDue, got, now+60)
	}
	sweep(0, 0) // nothing due yet
	clk.AdvanceSeconds(61)
	sweep(3, 3) // the three reservations released
	sweep(0, 0)
	got := due("imsi-001010000000007")
	if d, ok := got.(int); !ok || d <= int(now+60) {
		t.Fatalf("after the release: %s = %v, want the session's or the answer's expiry", BinDue, got)
	}
	// Once the idle session and the create's answer expire, the sweep
	// drops them and the record goes back to no BinDue.
	clk.AdvanceSeconds(2 * 3600)
	sweep(3, 3)
	sweep(0, 0)
	if got := due("imsi-001010000000007"); got != nil {
		t.Fatalf("nothing pending: %s = %v, want none", BinDue, got)
	}
}

// TestSweepChunkFor: a capped pass's scan commands each cover at most
// ~5,000 records (whole partitions, powers of two, 1 to 16 of them).
func TestSweepChunkFor(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{{0, 16}, {100_000, 16}, {1_280_000, 16}, {1_300_000, 8}, {2_000_000, 8}, {20_000_000, 1}, {1 << 40, 1}} {
		if got := sweepChunkFor(c.n); got != c.want {
			t.Errorf("sweepChunkFor(%d) = %d, want %d", c.n, got, c.want)
		}
		if got := sweepChunkFor(c.n); c.n/4096*int64(got) > sweepScanRecords && got > 1 {
			t.Errorf("sweepChunkFor(%d) = %d: %d records a command", c.n, got, c.n/4096*int64(got))
		}
	}
}

// TestSweepRecounts: a capped pass counts the accounts again as it goes
// (every 256 partitions), so accounts provisioned during the pass lengthen
// its spread. The pass runs on an injected clock that holds it at its
// first wait while the test provisions, whatever the machine's speed.
func TestSweepRecounts(t *testing.T) {
	cl := startStore(t)
	svc := New(cl, Config{})
	clk := newGatedClock()
	svc.pace = clk
	provisionAccounts(t, cl, "imsi-001010000000001", 200, 1000)
	start := clk.Now()
	done := make(chan error, 1)
	go func() {
		// 200 accounts at 500 a second: a 0.4-s spread, until the
		// recount at partition 256 sees the accounts added meanwhile.
		_, err := svc.sweepPass(context.Background(), 500, 0)
		done <- err
	}()
	select {
	case <-clk.waiting:
	case err := <-done:
		t.Fatalf("the pass ended (%v) without waiting once", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the pass did not reach its first wait in 30 s")
	}
	provisionAccounts(t, cl, "imsi-001010000000201", 400, 1000)
	close(clk.gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pass did not end in 30 s")
	}
	if got := svc.sweep.accounts.Load(); got != 600 {
		t.Fatalf("accounts counted at the pass's end %d, want 600", got)
	}
	// 600 accounts at 500 a second spread what was left of the pass over
	// up to 1.2 s.
	if el := clk.Now().Sub(start); el < 800*time.Millisecond || el > 1200*time.Millisecond {
		t.Fatalf("pass took %v; the recounted accounts should have spread it over ~1.2 s", el)
	}
}

// gatedClock is a passClock whose time moves only by the waits: each
// SleepUntil moves it to its target at once, except the first wait into
// the future, which first signals waiting and holds until gate is closed.
type gatedClock struct {
	mu      sync.Mutex
	now     time.Time
	first   sync.Once
	waiting chan struct{}
	gate    chan struct{}
}

func newGatedClock() *gatedClock {
	return &gatedClock{now: time.Unix(1_800_000_000, 0), waiting: make(chan struct{}), gate: make(chan struct{})}
}

func (c *gatedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *gatedClock) SleepUntil(ctx context.Context, t time.Time) error {
	if !t.After(c.Now()) {
		return ctx.Err()
	}
	c.first.Do(func() {
		close(c.waiting)
		select {
		case <-c.gate:
		case <-ctx.Done():
		}
	})
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
	return ctx.Err()
}
