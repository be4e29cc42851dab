package abm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

func sampleAccount() *account {
	a := &account{balance: 1000, debited: 5, currency: "EUR"}
	s := a.newSession("0123456789abcdef")
	s.lastSeq, s.expires = 7, 1_800_003_600
	s.res = append(s.res, reservation{rg: 10, amount: 10, units: 10_000_000, expires: 1_800_001_800},
		reservation{rg: 20, amount: 300, units: 300, expires: 1_800_001_800})
	s.lines = append(s.lines,
		chf.GrantLine{RatingGroup: 10, Granted: chf.Units{TotalVolume: 10_000_000}, ValidityTime: 1800, QuotaHoldingTime: 300, FinalUnit: true},
		chf.GrantLine{RatingGroup: 99, Result: chf.ResultRatingFailed},
		chf.GrantLine{RatingGroup: 20, Granted: chf.Units{Time: 300, UplinkVolume: 1, DownlinkVolume: 2, ServiceSpecific: 3}})
	s.op, s.digest, s.charged = chf.OpUpdate, 0xfeedface12345678, 42
	c := a.newSession("closed")
	c.closed, c.lastSeq, c.expires, c.result, c.op = true, 3, 1_800_000_600, chf.ResultQuotaLimitReached, chf.OpRelease
	a.reserved = 310
	a.overage = 12345
	r := a.newRecent()
	r.key, r.digest, r.expires, r.op = 1<<63+5, 99, 1_800_000_600, chf.OpCreate
	r.session = append(r.session, "0123456789abcdef"...)
	r.lines = append(r.lines, chf.GrantLine{RatingGroup: 10, Granted: chf.Units{TotalVolume: 10_000_000}, ValidityTime: 1800})
	r.charged = 3
	e := a.newRecent()
	e.key, e.op, e.result = 3, chf.OpEvent, chf.ResultQuotaLimitReached
	return a
}

// TestSessionBlobVersion5 reads a version 5 blob, whose recent
// identities carry a second, looser key: skipped, the rest kept.
func TestSessionBlobVersion5(t *testing.T) {
	b := []byte{5}
	b = binary.AppendVarint(b, 7)  // overage
	b = binary.AppendVarint(b, 0)  // credit limit
	b = binary.AppendVarint(b, 0)  // offline total
	b = binary.AppendVarint(b, 0)  // credited
	b = binary.AppendUvarint(b, 0) // buckets
	b = append(b, 0)               // account flags
	b = binary.AppendUvarint(b, 0) // sessions
	b = binary.AppendUvarint(b, 1) // recent identities
	b = binary.AppendUvarint(b, 41)
	b = binary.AppendUvarint(b, 42) // the looser key
	b = binary.AppendUvarint(b, 43)
	b = binary.AppendVarint(b, 1_800_000_600)
	b = append(b, byte(chf.OpEvent))
	b = binary.AppendUvarint(b, 0) // session
	b = append(b, byte(chf.ResultSuccess))
	b = binary.AppendUvarint(b, 0) // lines
	b = binary.AppendVarint(b, 5)  // charged
	var a account
	if err := a.decodeSessions(b); err != nil {
		t.Fatal(err)
	}
	if a.overage != 7 || len(a.recent) != 1 {
		t.Fatalf("decoded overage %d, %d recent", a.overage, len(a.recent))
	}
	if r := a.recent[0]; r.key != 41 || r.digest != 43 || r.op != chf.OpEvent || r.charged != 5 || r.expires != 1_800_000_600 {
		t.Fatalf("recent %+v", r)
	}
	if v := a.appendSessions(nil)[0]; v != blobVersion {
		t.Fatalf("re-encoded as version %d, want %d", v, blobVersion)
	}
}

func TestSessionBlobRoundTrip(t *testing.T) {
	a := sampleAccount()
	blob := a.appendSessions(nil)
	var b account
	if err := b.decodeSessions(blob); err != nil {
		t.Fatal(err)
	}
	if b.reserved != a.reserved || len(b.sessions) != 2 {
		t.Fatalf("decoded reserved %d sessions %d", b.reserved, len(b.sessions))
	}
	if again := b.appendSessions(nil); !bytes.Equal(again, blob) {
		t.Fatalf("re-encoding differs:\n%x\n%x", again, blob)
	}
	s := b.sessions[0]
	if string(s.id) != "0123456789abcdef" || s.lastSeq != 7 || s.closed || len(s.res) != 2 || len(s.lines) != 3 || s.lines[2].Granted.ServiceSpecific != 3 || !s.lines[0].FinalUnit {
		t.Fatalf("session %+v", s)
	}
	if c := b.sessions[1]; !c.closed || c.result != chf.ResultQuotaLimitReached || c.op != chf.OpRelease {
		t.Fatalf("closed session %+v", c)
	}
	if s.op != chf.OpUpdate || s.digest != 0xfeedface12345678 || b.overage != 12345 || len(b.recent) != 2 {
		t.Fatalf("decoded op %d digest %x overage %d recent %d", s.op, s.digest, b.overage, len(b.recent))
	}
	if r := b.recent[0]; r.key != 1<<63+5 || r.digest != 99 || string(r.session) != "0123456789abcdef" || len(r.lines) != 1 || r.lines[0].ValidityTime != 1800 || r.charged != 3 {
		t.Fatalf("recent %+v", r)
	}
	if s.charged != 42 || b.sessions[1].charged != 0 {
		t.Fatalf("charges of the last answers %d, %d; want 42, 0", s.charged, b.sessions[1].charged)
	}
	// A version 3 blob (before the answers' charges) reads with charges 0.
	v3 := []byte{3, 0, 0, 0, 0, 0, 1, 2, 'i', 'd', 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 0, 0, 0, 0, 0}
	var old account
	if err := old.decodeSessions(v3); err != nil || len(old.sessions) != 1 || old.sessions[0].lastSeq != 4 || old.sessions[0].charged != 0 ||
		len(old.recent) != 1 || old.recent[0].key != 1 || old.recent[0].charged != 0 {
		t.Fatalf("version 3 blob: %v %+v %+v", err, old.sessions, old.recent)
	}
	// A version 1 blob (before overage, digests and identities) still reads.
	var v1 account
	if err := v1.decodeSessions([]byte{1, 1, 2, 'i', 'd', 4, 0, 0, 0, 0, 0}); err != nil || len(v1.sessions) != 1 || v1.sessions[0].lastSeq != 4 {
		t.Fatalf("version 1 blob: %v %+v", err, v1.sessions)
	}
	// Decoding again into the same account does not allocate.
	if n := testing.AllocsPerRun(100, func() { _ = b.decodeSessions(blob) }); n != 0 {
		t.Fatalf("decode allocates %v times", n)
	}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = b.appendSessions(buf[:0]) }); n != 0 {
		t.Fatalf("encode allocates %v times", n)
	}
}

func TestSessionBlobCorrupt(t *testing.T) {
	blob := sampleAccount().appendSessions(nil)
	var a account
	for i := range len(blob) {
		if err := a.decodeSessions(blob[:i]); i > 0 && err == nil {
			t.Fatalf("truncated blob of %d bytes decoded", i)
		}
	}
	if err := a.decodeSessions(append(blob, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	if err := a.decodeSessions([]byte{9}); err == nil {
		t.Fatal("unknown version accepted")
	}
}

func FuzzDecodeSessions(f *testing.F) {
	f.Add(sampleAccount().appendSessions(nil))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, blob []byte) {
		var a account
		if err := a.decodeSessions(blob); err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again := a.appendSessions(nil)
		var b account
		if err := b.decodeSessions(again); err != nil {
			t.Fatalf("re-encoded blob does not decode: %v", err)
		}
		if !bytes.Equal(b.appendSessions(nil), again) {
			t.Fatal("encoding not stable")
		}
	})
}

// TestApplyInMemory checks apply's bookkeeping without a database.
func TestApplyInMemory(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 2, maxClosed: 1}
	a := &account{balance: 100, currency: "EUR"}
	var resp chf.ChargeResponse
	now := int64(1000)
	line := dataLine(0, 30_000_000) // 30 MB = 30 minor units
	f := func(req chf.ApplyRequest, result chf.Result, charged, balance, reserved int64) {
		t.Helper()
		a.apply(&req, now, &lim, &resp)
		if resp.Result != result || resp.Charged != charged || resp.Balance != balance || resp.Reserved != reserved {
			t.Fatalf("%+v: got %+v", req, resp)
		}
	}
	f(chf.ApplyRequest{Op: chf.OpCreate, Session: "a", Seq: 1, Lines: []chf.RatedLine{line}}, chf.ResultSuccess, 0, 100, 30)
	f(chf.ApplyRequest{Op: chf.OpCreate, Session: "b", Seq: 1, Lines: []chf.RatedLine{line}}, chf.ResultSuccess, 0, 100, 60)
	f(chf.ApplyRequest{Op: chf.OpCreate, Session: "c", Seq: 1, Lines: []chf.RatedLine{line}}, chf.ResultEndUserServiceDenied, 0, 100, 60)
	f(chf.ApplyRequest{Op: chf.OpCreate, Session: "a", Seq: 2}, chf.ResultInvalid, 0, 100, 60)
	// Usage beyond what the balance covers is capped: never negative.
	over := dataLine(500_000_000, 0)
	f(chf.ApplyRequest{Op: chf.OpRelease, Session: "a", Seq: 2, Lines: []chf.RatedLine{over}}, chf.ResultSuccess, 70, 30, 30)
	f(chf.ApplyRequest{Op: chf.OpRelease, Session: "b", Seq: 2}, chf.ResultSuccess, 0, 30, 0)
	// Only one closed session is kept: "a" was evicted, "b" replays.
	f(chf.ApplyRequest{Op: chf.OpRelease, Session: "b", Seq: 2}, chf.ResultSuccess, 0, 30, 0)
	f(chf.ApplyRequest{Op: chf.OpRelease, Session: "a", Seq: 2}, chf.ResultSessionUnknown, 0, 30, 0)
	now += 601
	f(chf.ApplyRequest{Op: chf.OpRelease, Session: "b", Seq: 2}, chf.ResultSessionUnknown, 0, 30, 0)
	if len(a.sessions) != 0 || a.debited != 70 {
		t.Fatalf("sessions %d debited %d", len(a.sessions), a.debited)
	}
}

// BenchmarkApplyAslite measures one update (read-modify-write through the
// official client) against an in-process aslite.
func BenchmarkApplyAslite(b *testing.B) {
	cl := startStore(b)
	const supi = "imsi-001010000000001"
	provisionAccounts(b, cl, supi, 1, 1<<60)
	svc := New(cl, Config{})
	ctx := context.Background()
	var resp chf.ChargeResponse
	req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: "0123456789abcdef", Seq: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
	if err := svc.Apply(ctx, &req, &resp); err != nil {
		b.Fatal(err)
	}
	req.Op = chf.OpUpdate
	req.Lines[0] = dataLine(5_000_000, 10_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req.Seq++
		if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
			b.Fatal(err, resp.Result)
		}
	}
}

// BenchmarkApplyBatchAslite measures one ApplyBatch of 64 one-time events
// on 64 accounts (each cached after the first batch: one batch write per
// batch) against an in-process aslite; ns/op is per batch.
func BenchmarkApplyBatchAslite(b *testing.B) {
	cl := startStore(b)
	const n = 64
	provisionAccounts(b, cl, "imsi-001010000000001", n, 1<<60)
	svc := New(cl, Config{})
	ctx := context.Background()
	reqs := make([]*chf.ApplyRequest, n)
	resps := make([]*chf.ChargeResponse, n)
	errs := make([]error, n)
	for i := range reqs {
		reqs[i] = &chf.ApplyRequest{Op: chf.OpEvent, SUPI: fmt.Sprintf("imsi-00101%010d", i+1), Lines: []chf.RatedLine{{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: 1}}}
		resps[i] = new(chf.ChargeResponse)
	}
	key := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range reqs {
			key++
			r.Key = key
		}
		svc.ApplyBatch(ctx, reqs, resps, errs)
		for i := range errs {
			if errs[i] != nil || resps[i].Result != chf.ResultSuccess {
				b.Fatal(errs[i], resps[i].Result)
			}
		}
	}
}

// BenchmarkApplyInMemory measures decode + apply + encode of one update of
// an account holding 8 sessions, without the database.
func BenchmarkApplyInMemory(b *testing.B) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 1024, maxClosed: 16}
	a := &account{balance: 1 << 60}
	var resp chf.ChargeResponse
	for i := range 8 {
		req := chf.ApplyRequest{Op: chf.OpCreate, Session: string(rune('a' + i)), Seq: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
		a.apply(&req, 1000, &lim, &resp)
	}
	blob := a.appendSessions(nil)
	req := chf.ApplyRequest{Op: chf.OpUpdate, Session: "c", Seq: 1, Lines: []chf.RatedLine{dataLine(5_000_000, 10_000_000)}}
	var acc account
	b.ReportAllocs()
	for b.Loop() {
		req.Seq++
		if err := acc.decodeSessions(blob); err != nil {
			b.Fatal(err)
		}
		acc.balance = 1 << 60
		acc.apply(&req, 1000, &lim, &resp)
		blob = acc.appendSessions(blob[:0])
	}
}

// TestRecentIdentityWindow checks a repeated event is answered from the
// record within the window (MaxRecent events, ClosedTTL) and charged anew
// after it, and that a repeat with other content is refused.
func TestRecentIdentityWindow(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 16, maxClosed: 16, maxRecent: MaxRecent}
	a := &account{balance: 1000, currency: "EUR"}
	ev := func(key uint64, digest uint64) *chf.ApplyRequest {
		return &chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-1", Key: key, Digest: digest,
			Lines: []chf.RatedLine{{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: 5, Price: 5, UnitSize: 1}}}
	}
	var resp chf.ChargeResponse
	now := int64(1_800_000_000)
	// charge returns what the balance lost; a replay reports the first
	// answer's charge (Replayed) and debits nothing.
	charge := func(r *chf.ApplyRequest) int64 {
		t.Helper()
		b := a.balance
		a.apply(r, now, &lim, &resp)
		if resp.Replayed && resp.Charged != 5 {
			t.Fatalf("replay reports charged %d, want the first answer's 5", resp.Charged)
		}
		return b - a.balance
	}
	if c := charge(ev(1, 7)); c != 5 || resp.Replayed {
		t.Fatalf("first event charged %d replayed %v", c, resp.Replayed)
	}
	if c := charge(ev(1, 7)); c != 0 || resp.Result != chf.ResultSuccess || !resp.Replayed {
		t.Fatalf("repeated event debited %d result %d replayed %v", c, resp.Result, resp.Replayed)
	}
	if charge(ev(1, 8)); resp.Result != chf.ResultReplayMismatch {
		t.Fatalf("repeat with other content: result %d", resp.Result)
	}
	// A retransmission with a new timestamp has another identity (Key):
	// only the exact identity is answered from the record, so it is a
	// new event, charged.
	if c := charge(ev(100, 7)); c != 5 || resp.Replayed {
		t.Fatalf("same content under another identity debited %d replayed %v, want a new charge of 5", c, resp.Replayed)
	}
	for k := uint64(2); k <= MaxRecent+1; k++ {
		charge(ev(k*10, 7))
	}
	if c := charge(ev(1, 7)); c != 5 {
		t.Fatalf("after %d newer events the first is forgotten: charged %d, want 5", MaxRecent, c)
	}
	now += lim.closedTTL
	if c := charge(ev(1, 7)); c != 5 {
		t.Fatalf("after ClosedTTL: charged %d, want 5", c)
	}
	if len(a.recent) > MaxRecent {
		t.Fatalf("%d identities kept, bound %d", len(a.recent), MaxRecent)
	}
}

// TestBucketsInOrderAndPlanRoundTrip: usage takes the bucket expiring
// first first, then the next, then money (rounded on the rest); expired
// buckets drop out; the plan, totals, held bucket units and notifyUri
// survive the blob.
func TestBucketsInOrderAndPlanRoundTrip(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 4, maxClosed: 4}
	now := int64(1000)
	a := &account{balance: 100, currency: "EUR", creditLimit: 50, buckets: []bucket{
		{svc: chf.ServiceData, units: 3_000_000, expires: 0},    // never: last
		{svc: chf.ServiceData, units: 2_000_000, expires: 5000}, // second
		{svc: chf.ServiceData, units: 1_000_000, expires: 2000}, // first
		{svc: chf.ServiceVoice, units: 60, expires: 2000},
	}}
	var resp chf.ChargeResponse
	create := chf.ApplyRequest{Op: chf.OpCreate, Session: "s", Seq: 0, Notify: []byte("http://smf/n"), Lines: []chf.RatedLine{dataLine(0, 4_000_000)}}
	a.apply(&create, now, &lim, &resp)
	if resp.Result != chf.ResultSuccess || resp.Lines[0].Granted.TotalVolume != 4_000_000 || resp.Reserved != 0 || a.bucketAvail(chf.ServiceData) != 2_000_000 {
		t.Fatalf("create %+v, avail %d", resp, a.bucketAvail(chf.ServiceData))
	}
	// 1.5 MB used: all of the first bucket, half of the second.
	upd := chf.ApplyRequest{Op: chf.OpUpdate, Session: "s", Seq: 1, Lines: []chf.RatedLine{dataLine(1_500_000, 0)}}
	a.apply(&upd, now, &lim, &resp)
	if resp.Charged != 0 || a.buckets[2].units != 0 || a.buckets[1].units != 1_500_000 || a.buckets[0].units != 3_000_000 {
		t.Fatalf("after 1.5 MB: %+v %+v", resp, a.buckets)
	}
	// Round trip: plan, totals, held units and notifyUri.
	a.offline, a.credited = 7, 9
	blob := a.appendSessions(nil)
	var b account
	if err := b.decodeSessions(blob); err != nil {
		t.Fatal(err)
	}
	if b.creditLimit != 50 || b.offline != 7 || b.credited != 9 || len(b.buckets) != 4 || b.buckets[1].units != 1_500_000 ||
		string(b.sessions[0].notify) != "http://smf/n" {
		t.Fatalf("decoded %+v", b)
	}
	// Later the 2000 bucket has expired (the voice one too): 6 MB used
	// takes 1.5 MB + 3 MB of buckets, 1.5 MB of money = 2 minor units.
	b.balance, b.currency = a.balance, a.currency
	rel := chf.ApplyRequest{Op: chf.OpRelease, Session: "s", Seq: 2, Lines: []chf.RatedLine{dataLine(6_000_000, 0)}}
	b.apply(&rel, 3000, &lim, &resp)
	if resp.Charged != 2 || resp.Balance != 98 || len(b.buckets) != 2 || b.bucketAvail(chf.ServiceData) != 0 || b.bucketAvail(chf.ServiceVoice) != 0 {
		t.Fatalf("release %+v, buckets %+v", resp, b.buckets)
	}
	// Postpaid: down to -50 (available 148 from 98 + 50).
	ev := chf.ApplyRequest{Op: chf.OpCreate, Session: "t", Seq: 0, Lines: []chf.RatedLine{dataLine(0, 200_000_000)}}
	b.apply(&ev, 3000, &lim, &resp)
	if g := resp.Lines[0]; g.Granted.TotalVolume != 148_000_000 || !g.FinalUnit || resp.Reserved != 148 {
		t.Fatalf("postpaid grant %+v", resp)
	}
}

// TestCreateAndEventNeverReplayEachOther checks a create and an event with
// the same identity are two requests.
func TestCreateAndEventNeverReplayEachOther(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 16, maxClosed: 16, maxRecent: MaxRecent}
	a := &account{balance: 1000, currency: "EUR"}
	var resp chf.ChargeResponse
	a.apply(&chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-1", Session: "s1", Key: 5, Digest: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}, 1000, &lim, &resp)
	a.apply(&chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-1", Key: 5, Digest: 2,
		Lines: []chf.RatedLine{{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: 5, Price: 5, UnitSize: 1}}}, 1000, &lim, &resp)
	if resp.Result != chf.ResultSuccess || resp.Charged != 5 {
		t.Fatalf("event with a create's identity: %+v", resp)
	}
}
