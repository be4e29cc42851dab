package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/ocp"
	"github.com/chf-testbed/testbed/tariff"
)

// pollNotifications runs the CGW's notification poller for the test.
func (e *env) pollNotifications(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.cgw.PollNotifications(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
}

// sweep runs one pass of the ABM's reservation sweep.
func (e *env) sweep(t *testing.T) {
	t.Helper()
	if _, err := e.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitHits waits until sm got n notifications (5 s at most).
func waitHits(t *testing.T, sm *smf, n int32) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); sm.hits.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications, want %d", sm.hits.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTariffChangeReauthorizes: the OCP reloads its tariff file; the
// ABM's sweep finds the open sessions granted under the old tariff, the
// CGW's poller sends each a REAUTHORIZATION (validated against the
// spec), and the update that answers it is rated on the new tariff. A
// second sweep sends nothing more, and an invalid file keeps the tariff.
func TestTariffChangeReauthorizes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tariff.yaml")
	if err := os.WriteFile(path, []byte(tariff.DefaultFile), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := tariff.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := startCHFTariff(t, tf)
	e.pollNotifications(t)
	w := ocp.NewTariffWatcher(e.proc, path, slog.New(slog.DiscardHandler))
	sm := startSMF(t)
	c := clients(t, e)[0]
	nu := `"notifyUri":"` + sm.url + `"`
	s := supi(4)
	ref, _ := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`, nu))
	// A session on another account without a notifyUri: found, not sent.
	c.create(req(supi(5), 0, `{"ratingGroup":10,"requestedUnit":{}}`))

	e.sweep(t)
	time.Sleep(100 * time.Millisecond)
	if n := sm.hits.Load(); n != 0 {
		t.Fatalf("%d notifications before any tariff change", n)
	}

	// An invalid file: the old tariff stays.
	old := e.proc.Tariff().Epoch()
	if err := os.WriteFile(path, []byte("ratingGroups: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload("test"); err == nil || e.proc.Tariff().Epoch() != old {
		t.Fatalf("invalid tariff: err %v, epoch %d (was %d)", err, e.proc.Tariff().Epoch(), old)
	}
	// Data at 3 per MB.
	changed := strings.Replace(tariff.DefaultFile, "price: 1                # per MB", "price: 3                # per MB", 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	w.Check()
	if e.proc.Tariff().Epoch() == old || e.proc.Tariff().Rate(10).Price != 3 {
		t.Fatalf("tariff not reloaded: epoch %d, price %d", e.proc.Tariff().Epoch(), e.proc.Tariff().Rate(10).Price)
	}
	// The ABM learns the new epoch from the poll; wait for one.
	time.Sleep(100 * time.Millisecond)
	e.sweep(t)
	waitHits(t, sm, 1)
	if ty := sm.types(); len(ty) != 1 || ty[0] != "REAUTHORIZATION" {
		t.Fatalf("notifications %v", ty)
	}
	// The SMF re-authorises: its usage is rated on the new tariff.
	up := c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"totalVolume":2000000,"localSequenceNumber":1,"triggers":[{"triggerType":"FORCED_REAUTHORISATION","triggerCategory":"IMMEDIATE_REPORT"}]}]}`))
	if up.status != 200 || up.header.Get("X-Chf-Charged") != "6" {
		t.Fatalf("update after re-authorisation: %d charged %q %s", up.status, up.header.Get("X-Chf-Charged"), up.body)
	}
	// Recorded: the next pass sends nothing more.
	e.sweep(t)
	time.Sleep(100 * time.Millisecond)
	if n := sm.hits.Load(); n != 1 {
		t.Fatalf("%d notifications after a second sweep, want 1", n)
	}
	if r := c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":10,"usedUnitContainer":[{"totalVolume":1000000,"localSequenceNumber":2}]}`)); r.status != 204 || r.header.Get("X-Chf-Charged") != "3" {
		t.Fatalf("release: %d charged %q %s", r.status, r.header.Get("X-Chf-Charged"), r.body)
	}
}

// TestBucketExpiryReauthorizes: a session granted from a data bucket is
// re-authorised once the bucket expires (the ABM's injected clock moved
// past its validity), and its usage is then paid in money.
func TestBucketExpiryReauthorizes(t *testing.T) {
	e := startCHF(t)
	e.pollNotifications(t)
	sm := startSMF(t)
	c := clients(t, e)[0]
	s := supi(6)
	if st, _ := c.topUp(s, operatorToken, `{"bucket":{"service":"data","units":50000000,"validity":600}}`); st != 200 {
		t.Fatalf("top-up: %d", st)
	}
	ref, cr := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`, `"notifyUri":"`+sm.url+`"`))
	if cr.header.Get("X-Chf-Charged") != "0" {
		t.Fatalf("create: %s", cr.body)
	}
	e.sweep(t)
	time.Sleep(100 * time.Millisecond)
	if n := sm.hits.Load(); n != 0 {
		t.Fatalf("%d notifications while the bucket lives", n)
	}
	// Used from the bucket while it lives: nothing charged.
	up := c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"totalVolume":4000000,"localSequenceNumber":1}]}`))
	if up.status != 200 || up.header.Get("X-Chf-Charged") != "0" {
		t.Fatalf("update from the bucket: %d charged %q %s", up.status, up.header.Get("X-Chf-Charged"), up.body)
	}
	e.clock.advance(601 * time.Second)
	e.sweep(t)
	waitHits(t, sm, 1)
	if ty := sm.types(); len(ty) != 1 || ty[0] != "REAUTHORIZATION" {
		t.Fatalf("notifications %v", ty)
	}
	// The answering update: the bucket is gone, money pays (1 per MB).
	up = c.do("POST", ref+"/update", req("", 2, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"totalVolume":5000000,"localSequenceNumber":2}]}`))
	if up.status != 200 || up.header.Get("X-Chf-Charged") != "5" {
		t.Fatalf("update after expiry: %d charged %q %s", up.status, up.header.Get("X-Chf-Charged"), up.body)
	}
	// Its new grant is money: nothing more to re-authorise.
	e.sweep(t)
	time.Sleep(100 * time.Millisecond)
	if n := sm.hits.Load(); n != 1 {
		t.Fatalf("%d notifications after the re-grant, want 1", n)
	}
}

// TestGyTariffChangeRAR: on Gy the sweep's re-authorisation is a RAR to
// the session's peer, and the CCR-U that answers is rated on the new
// tariff.
func TestGyTariffChangeRAR(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tariff.yaml")
	if err := os.WriteFile(path, []byte(tariff.DefaultFile), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := tariff.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := startCHFTariff(t, tf)
	e.pollNotifications(t)
	got := make(chan bool, 4)
	c := startGyConfig(t, e, gy.Config{OnServerRequest: func(abort bool, sid string) { got <- abort }})
	sid := c.NewSessionID()
	imsi := imsiOf(11)
	gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
	changed := strings.Replace(tariff.DefaultFile, "price: 1                # per MB", "price: 3                # per MB", 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ocp.NewTariffWatcher(e.proc, path, slog.New(slog.DiscardHandler)).Reload("test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a poll carries the new epoch
	e.sweep(t)
	select {
	case abort := <-got:
		if abort {
			t.Fatal("ASR, want RAR")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no RAR")
	}
	a := gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestUpdate, Number: 1, IMSI: imsi,
		Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 1_000_000}, Reason: wire.ReasonForcedReauth, HasReason: true}}}, wire.ResultSuccess)
	if a.Charged != 3 {
		t.Fatalf("CCR-U after RAR: %+v", a)
	}
}
