package abm

import (
	"context"
	"fmt"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// openSessions creates n sessions on a (ids as the CGW draws them: 16
// hex digits), each holding one data reservation and its last answer.
func openSessions(t testing.TB, a *account, lim *limits, n int, now int64) {
	t.Helper()
	var resp chf.ChargeResponse
	for i := range n {
		req := chf.ApplyRequest{Op: chf.OpCreate, Session: fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15), Seq: 0,
			Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
		a.apply(&req, now, lim, &resp)
		if resp.Result != chf.ResultSuccess {
			t.Fatalf("create %d: %v", i, resp.Result)
		}
	}
}

// The account record grows linearly with its open sessions, by at most
// SessionRecordBytes each; at the cap it stays far below Aerospike's
// 1 MiB record limit, also at MaxSessionsLimit.
func TestRecordSizeOpenSessions(t *testing.T) {
	now := int64(1_800_000_000)
	var prev, prevN int
	for _, n := range []int{0, 1, 10, 100, 1000, DefaultMaxSessions, MaxSessionsLimit} {
		lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: MaxSessionsLimit, maxClosed: 16, maxRecent: MaxRecent}
		a := &account{balance: 1 << 50, currency: "EUR"}
		openSessions(t, a, &lim, n, now)
		blob := a.appendSessions(nil)
		var b account
		if err := b.decodeSessions(blob); err != nil || len(b.sessions) != n {
			t.Fatalf("%d sessions: decoded %d, %v", n, len(b.sessions), err)
		}
		t.Logf("%5d open sessions: session blob %7d bytes (%.1f per session)", n, len(blob), float64(len(blob))/float64(max(n, 1)))
		if n > prevN && prevN > 0 {
			if per := float64(len(blob)-prev) / float64(n-prevN); per > SessionRecordBytes {
				t.Errorf("%d → %d sessions: %.1f bytes per session, documented %d", prevN, n, per, SessionRecordBytes)
			}
		}
		if len(blob) >= 1<<20 {
			t.Errorf("%d sessions: %d bytes, beyond Aerospike's default 1 MiB record", n, len(blob))
		}
		prev, prevN = len(blob), n
	}
}

// At the cap a create is refused with END_USER_SERVICE_DENIED: nothing
// reserved or charged, the record unchanged and still decoding; once a
// session is released a create succeeds again.
func TestMaxSessionsCap(t *testing.T) {
	now := int64(1_800_000_000)
	const limit = 64
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: limit, maxClosed: 16, maxRecent: MaxRecent}
	a := &account{balance: 1 << 40, currency: "EUR"}
	openSessions(t, a, &lim, limit, now)
	before := a.appendSessions(nil)
	bal, res := a.balance, a.reserved
	var resp chf.ChargeResponse
	req := chf.ApplyRequest{Op: chf.OpCreate, Session: "ffffffffffffffff", Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
	write := a.apply(&req, now, &lim, &resp)
	if resp.Result != chf.ResultEndUserServiceDenied || resp.Charged != 0 || len(resp.Lines) > 0 && resp.Lines[0].Granted.TotalVolume != 0 {
		t.Fatalf("create beyond the cap: %+v", resp)
	}
	if a.balance != bal || a.reserved != res || a.openSessions() != limit {
		t.Fatalf("balance %d→%d reserved %d→%d open %d", bal, a.balance, res, a.reserved, a.openSessions())
	}
	after := a.appendSessions(nil)
	var b account
	if err := b.decodeSessions(after); err != nil {
		t.Fatalf("record after the refusal: %v", err)
	}
	if write && len(after) > len(before)+64 {
		t.Fatalf("the refusal grew the record by %d bytes", len(after)-len(before))
	}
	rel := chf.ApplyRequest{Op: chf.OpRelease, Session: fmt.Sprintf("%016x", uint64(0)), Seq: 1}
	if a.apply(&rel, now, &lim, &resp); resp.Result != chf.ResultSuccess {
		t.Fatalf("release: %v", resp.Result)
	}
	req.Session = "fffffffffffffffe"
	if a.apply(&req, now, &lim, &resp); resp.Result != chf.ResultSuccess {
		t.Fatalf("create after a release: %v", resp.Result)
	}
}

// BenchmarkApplyOpenSessions measures decode + apply + encode of one
// update on an account with N open sessions: the CPU cost of a large
// record, which every charging event of the account pays.
func BenchmarkApplyOpenSessions(b *testing.B) {
	for _, n := range []int{1, 10, 100, DefaultMaxSessions} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			now := int64(1_800_000_000)
			lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: MaxSessionsLimit, maxClosed: 16, maxRecent: MaxRecent}
			a := &account{balance: 1 << 50, currency: "EUR"}
			openSessions(b, a, &lim, n, now)
			blob := a.appendSessions(nil)
			req := chf.ApplyRequest{Op: chf.OpUpdate, Session: fmt.Sprintf("%016x", uint64(0)), Seq: 0, Lines: []chf.RatedLine{dataLine(1_000_000, 10_000_000)}}
			var resp chf.ChargeResponse
			var acc account
			b.SetBytes(int64(len(blob)))
			b.ReportAllocs()
			for b.Loop() {
				if err := acc.decodeSessions(blob); err != nil {
					b.Fatal(err)
				}
				acc.balance = 1 << 50
				req.Seq++
				acc.apply(&req, now, &lim, &resp)
				blob = acc.appendSessions(blob[:0])
			}
		})
	}
}

// BenchmarkApplyHeavyAslite measures one update, through the service and
// its account cache against an in-process aslite, of a session of an
// account holding N open sessions (what a popular subscriber under a
// skewed load costs per event, the write of its record included).
func BenchmarkApplyHeavyAslite(b *testing.B) {
	for _, n := range []int{10, 100, DefaultMaxSessions} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cl := startStore(b)
			const supi = "imsi-001010000000001"
			provisionAccounts(b, cl, supi, 1, 1<<60)
			svc := New(cl, Config{MaxSessions: MaxSessionsLimit})
			ctx := context.Background()
			var resp chf.ChargeResponse
			for i := range n {
				req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15), Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
				if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
					b.Fatal(err, resp.Result)
				}
			}
			req := chf.ApplyRequest{Op: chf.OpUpdate, SUPI: supi, Session: fmt.Sprintf("%016x", uint64(0)), Lines: []chf.RatedLine{dataLine(1_000_000, 10_000_000)}}
			b.ReportAllocs()
			for b.Loop() {
				req.Seq++
				if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
					b.Fatal(err, resp.Result)
				}
			}
		})
	}
}
