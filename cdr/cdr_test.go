package cdr

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cdr/cdrtest"
	"github.com/chf-testbed/testbed/cdr/collector"
	"github.com/chf-testbed/testbed/chf"
)

var t0 = time.Date(2026, 12, 1, 10, 20, 30, 0, time.UTC)

func TestRecordDecodesIndependently(t *testing.T) {
	f := func(name string, r Record) {
		t.Helper()
		b := AppendCHFRecord([]byte("x"), &r)[1:]
		got, err := cdrtest.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v\n% x", name, err, b)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d records", name, len(got))
		}
		g := got[0]
		if g.RecordType != 200 || g.Node != r.Node || g.SUPI != r.SUPI || g.Session != r.Session ||
			!g.Opened.Equal(r.Opened.Truncate(time.Second)) || g.Duration != r.Duration.Truncate(time.Second) ||
			g.Sequence != int64(r.Sequence) || g.Cause != int64(r.Cause) || g.LocalSequence != int64(r.LocalSequence) ||
			!g.HasCharged || g.Charged != r.Charged || g.Currency != r.Currency || g.Functionality != int(r.Consumer) {
			t.Fatalf("%s: decoded %+v from %+v", name, g, r)
		}
		if len(g.Usage) != len(r.Usage) {
			t.Fatalf("%s: %d containers, want %d", name, len(g.Usage), len(r.Usage))
		}
		// Containers come out grouped by rating group, in order of
		// first appearance.
		var want []Usage
		for i, u := range r.Usage {
			dup := false
			for _, p := range r.Usage[:i] {
				dup = dup || p.RatingGroup == u.RatingGroup
			}
			if dup {
				continue
			}
			for _, v := range r.Usage[i:] {
				if v.RatingGroup == u.RatingGroup {
					want = append(want, v)
				}
			}
		}
		for i, u := range want {
			c := g.Usage[i]
			var units int64
			switch u.Service {
			case chf.ServiceData:
				units = c.Volume
			case chf.ServiceVoice:
				units = c.Time
			case chf.ServiceSMS:
				units = c.Events
			}
			if c.RatingGroup != int64(u.RatingGroup) || units != int64(u.Units) || c.Seq != int64(u.Seq) || !c.TriggerTime.Equal(u.At.Truncate(time.Second)) {
				t.Fatalf("%s: container %d decoded %+v from %+v", name, i, c, u)
			}
		}
	}
	f("event", Record{Node: "ocp-0", SUPI: "imsi-001010000000001", Consumer: FunctionalitySMSF, Opened: t0, Cause: CauseNormalRelease,
		LocalSequence: 1, Charged: 15, Currency: "EUR", Usage: []Usage{{RatingGroup: 30, Service: chf.ServiceSMS, Units: 3, At: t0}}})
	f("empty session", Record{Node: "n", SUPI: "msisdn-4915112345678", Consumer: FunctionalitySMF, Session: "s1", Opened: t0,
		Sequence: 1, LocalSequence: 1 << 40, Charged: 0})
	var many []Usage
	for i := range 40 {
		rg := []uint32{10, 20, 300000}[i%3]
		svc := []chf.Service{chf.ServiceData, chf.ServiceVoice, chf.ServiceData}[i%3]
		many = append(many, Usage{RatingGroup: rg, Service: svc, Units: uint64(i) * 123457 << (i % 30), Seq: uint32(i), At: t0.Add(time.Duration(i) * time.Minute)})
	}
	f("long session", Record{Node: strings.Repeat("ocp-abcdefgh-", 30), SUPI: "nai-user@example.org", Consumer: FunctionalitySMF,
		Session: strings.Repeat("a", 64), Opened: t0, Duration: 3723500 * time.Millisecond, Sequence: 300, Cause: CauseTimeLimit,
		LocalSequence: 255, Charged: -1 << 40, Currency: "USD", Usage: many})
	f("big values", Record{Node: "n", SUPI: "imsi-1", Opened: t0, Cause: CauseManagementIntervention, LocalSequence: 1<<63 - 1,
		Charged: 1<<63 - 1, Usage: []Usage{{RatingGroup: 1<<32 - 1, Service: chf.ServiceData, Units: 1<<63 - 1, Seq: 1<<32 - 1}}})
}

// TestReplayRecordDecodes: a replay record's mark and sequence number,
// and an event's identity as its chargingSessionIdentifier.
func TestReplayRecordDecodes(t *testing.T) {
	r := Record{Node: "n", SUPI: "imsi-1", Consumer: FunctionalitySMSF, EventKey: 0x0123456789abcdef, Opened: t0, LocalSequence: 9,
		Charged: 5, Replay: true, ReplaySeq: 1 << 31, Usage: []Usage{{RatingGroup: 30, Service: chf.ServiceSMS, Units: 1, Seq: 1 << 31, At: t0}}}
	got, err := cdrtest.Decode(AppendCHFRecord(nil, &r))
	if err != nil || len(got) != 1 {
		t.Fatalf("%+v, %v", got, err)
	}
	if g := got[0]; !g.Replay || g.ReplaySeq != 1<<31 || g.Session != "ev-0123456789abcdef" || g.Session != EventSessionID(r.EventKey) || g.Charged != 5 {
		t.Fatalf("decoded %+v", g)
	}
	r.Replay = false
	if got, err := cdrtest.Decode(AppendCHFRecord(nil, &r)); err != nil || got[0].Replay {
		t.Fatalf("not a replay: %+v, %v", got, err)
	}
}

func TestAppendCHFRecordDoesNotAllocate(t *testing.T) {
	r := Record{Node: "ocp-0", SUPI: "imsi-001010000000001", Session: "0123456789abcdef", Opened: t0, Sequence: 2,
		Charged: 12, Currency: "EUR", Usage: []Usage{{RatingGroup: 10, Service: chf.ServiceData, Units: 5_000_000, Seq: 1, At: t0}}}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendCHFRecord(buf[:0], &r) }); n != 0 {
		t.Fatalf("AppendCHFRecord allocates %v times", n)
	}
	r.Session, r.EventKey, r.Replay, r.ReplaySeq = "", 0xfeed, true, 1 // an event's replay record
	if n := testing.AllocsPerRun(100, func() { buf = AppendCHFRecord(buf[:0], &r) }); n != 0 {
		t.Fatalf("AppendCHFRecord of a replay record allocates %v times", n)
	}
}

// clock is an injected clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func decodeDir(t *testing.T, dir string) []cdrtest.Record {
	t.Helper()
	rs, err := cdrtest.DecodeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.LocalSequence != int64(i+1) {
			t.Fatalf("record %d in %s has localRecordSequenceNumber %d: lost or repeated records", i+1, r.File, r.LocalSequence)
		}
	}
	return rs
}

func TestWriterRotatesBySizeAndAge(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: t0}
	w, err := NewWriter(WriterConfig{Dir: dir, Prefix: "ocp-0", MaxSize: 1000, MaxAge: time.Minute, Fsync: FsyncFlush, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Node: "ocp-0", SUPI: "imsi-001010000000001", Session: "s", Opened: t0, Charged: 1,
		Usage: []Usage{{RatingGroup: 10, Service: chf.ServiceData, Units: 1, At: t0}}}
	for range 100 { // ~100 bytes each: a file every 10 records
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	open, _ := filepath.Glob(filepath.Join(dir, "*"+OpenSuffix))
	done, _ := filepath.Glob(filepath.Join(dir, "*"+Suffix))
	if len(open) != 1 || len(done) < 8 {
		t.Fatalf("%d open and %d finished files after 100 records of ~100 bytes with 1000-byte files", len(open), len(done))
	}
	clk.Add(time.Minute)
	if err := w.Flush(); err != nil { // the open file is a minute old: finished
		t.Fatal(err)
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*"+OpenSuffix)); len(open) != 0 {
		t.Fatalf("file older than --cdr-file-age still open: %v", open)
	}
	w.Write(&r)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&r); err != ErrClosed {
		t.Fatalf("Write after Close: %v", err)
	}
	rs := decodeDir(t, dir)
	if len(rs) != 101 {
		t.Fatalf("%d records, want 101", len(rs))
	}
	if st := w.Stats(); st.Records != 101 || st.Files < 10 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWriterFinishesFilesLeftOpen(t *testing.T) {
	dir := t.TempDir()
	r := Record{Node: "n", SUPI: "imsi-1", Opened: t0, LocalSequence: 1}
	b := AppendCHFRecord(nil, &r)
	r.LocalSequence = 2
	b = AppendCHFRecord(b, &r)
	torn := append(b, AppendCHFRecord(nil, &r)[:7]...) // a crash mid-record
	if err := os.WriteFile(filepath.Join(dir, "n-x"+OpenSuffix), torn, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(WriterConfig{Dir: dir, Prefix: "n", MaxSize: 1 << 20, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, err := os.ReadFile(filepath.Join(dir, "n-x"+Suffix))
	if err != nil || string(got) != string(b) {
		t.Fatalf("recovered file: %v, %d bytes, want the %d of the whole records", err, len(got), len(b))
	}
}

func FuzzTLVLen(f *testing.F) {
	f.Add(AppendCHFRecord(nil, &Record{Node: "n", Opened: t0}))
	f.Add([]byte{0xbf, 0x81, 0x48, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := tlvLen(b); ok && (n <= 0 || n > len(b)) {
			t.Fatalf("tlvLen %d of %d bytes", n, len(b))
		}
	})
}

func newRecorder(t *testing.T, cfg Config) (*Recorder, *clock, string) {
	t.Helper()
	dir := t.TempDir()
	clk := &clock{now: t0}
	cfg.Dir, cfg.Node, cfg.FlushInterval = dir, "ocp-test", time.Hour // the test sweeps by hand
	r, err := NewRecorder(cfg, clk.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, clk, dir
}

func apply(op chf.Op, supi, session string, seq uint32, lines ...chf.RatedLine) *chf.ApplyRequest {
	return &chf.ApplyRequest{Op: op, SUPI: supi, Session: session, Seq: seq, Lines: lines}
}

func data(units uint64) chf.RatedLine {
	return chf.RatedLine{RatingGroup: 10, Service: chf.ServiceData, UsedUnits: units, UsedCost: int64(units / 1_000_000)}
}

func TestRecorderSessionsAndEvents(t *testing.T) {
	r, clk, dir := newRecorder(t, DefaultConfig())
	ok := func(charged int64) *chf.ChargeResponse {
		return &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: charged, Currency: "EUR"}
	}
	// A replay reports the first answer's charge, marked Replayed.
	replay := func(charged int64) *chf.ChargeResponse {
		return &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: charged, Currency: "EUR", Replayed: true}
	}
	// A session: create, two updates (one repeated), release (repeated).
	r.Charged(apply(chf.OpCreate, "imsi-1", "s1", 0, data(0)), ok(0))
	r.Charged(apply(chf.OpCreate, "imsi-1", "s1", 0, data(0)), &chf.ChargeResponse{Result: chf.ResultSuccess, Session: "s1", Replayed: true})
	clk.Add(10 * time.Second)
	r.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 1, data(3_000_000)), ok(3))
	r.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 1, data(3_000_000)), replay(3)) // retransmission
	clk.Add(10 * time.Second)
	r.Charged(apply(chf.OpRelease, "imsi-1", "s1", 2, data(2_500_000)), ok(2))
	r.Charged(apply(chf.OpRelease, "imsi-1", "s1", 2, data(2_500_000)), replay(2)) // retransmission
	// Refused requests write nothing.
	r.Charged(apply(chf.OpCreate, "imsi-2", "s2", 0, data(0)), &chf.ChargeResponse{Result: chf.ResultQuotaLimitReached})
	r.Charged(apply(chf.OpUpdate, "imsi-2", "s9", 1, data(1)), &chf.ChargeResponse{Result: chf.ResultSessionUnknown})
	// An event, and its repeat.
	sms := chf.RatedLine{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 2, UsedCost: 10}
	r.Charged(apply(chf.OpEvent, "imsi-3", "", 0, sms), ok(10))
	r.Charged(apply(chf.OpEvent, "imsi-3", "", 0, sms), replay(10))
	// A session still open at Close.
	r.Charged(apply(chf.OpCreate, "imsi-4", "s4", 0, data(0)), ok(0))
	r.Charged(apply(chf.OpUpdate, "imsi-4", "s4", 1, data(7_000_000)), ok(7))
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs := decodeDir(t, dir)
	if len(rs) != 3 {
		t.Fatalf("%d records, want 3: %+v", len(rs), rs)
	}
	s1, ev, s4 := rs[0], rs[1], rs[2]
	if s1.SUPI != "imsi-1" || s1.Session != "s1" || s1.Cause != int64(CauseNormalRelease) || s1.Charged != 5 || s1.Currency != "EUR" ||
		s1.Duration != 20*time.Second || s1.Sequence != 1 || len(s1.Usage) != 2 || s1.Usage[0].Volume != 3_000_000 || s1.Usage[1].Volume != 2_500_000 ||
		s1.Usage[1].Seq != 2 || !s1.Opened.Equal(t0) || s1.Node != "ocp-test" || s1.Functionality != int(FunctionalitySMF) {
		t.Fatalf("session record %+v", s1)
	}
	if ev.SUPI != "imsi-3" || ev.Session != "" || ev.Charged != 10 || len(ev.Usage) != 1 || ev.Usage[0].Events != 2 || ev.Functionality != int(FunctionalitySMSF) {
		t.Fatalf("event record %+v", ev)
	}
	if s4.SUPI != "imsi-4" || s4.Cause != int64(CauseManagementIntervention) || s4.Charged != 7 || len(s4.Usage) != 1 {
		t.Fatalf("record of the session open at Close %+v", s4)
	}
}

func TestRecorderPartialRecords(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PartialTime, cfg.PartialVolume, cfg.PartialContainers = time.Minute, 10_000_000, 3
	r, clk, dir := newRecorder(t, cfg)
	ok := func(c int64) *chf.ChargeResponse { return &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: c} }
	var want int64
	seq := uint32(0)
	up := func(s string, units uint64) {
		seq++
		r.Charged(apply(chf.OpUpdate, "imsi-1", s, seq, data(units)), ok(int64(units/1_000_000)))
		want += int64(units / 1_000_000)
	}
	up("vol", 6_000_000)
	up("vol", 6_000_000) // 12 MB ≥ 10 MB: volumeLimit
	up("cnt", 1_000_000)
	up("cnt", 1_000_000)
	up("cnt", 1_000_000) // 3 containers: maxChangeCond
	up("time", 1_000_000)
	clk.Add(time.Minute)
	r.sweep(clk.Now(), false) // timeLimit for "time"; "vol" and "cnt" have nothing new: forgotten
	clk.Add(time.Minute)
	r.sweep(clk.Now(), false) // "time" idle since its partial: forgotten
	seq++
	r.Charged(apply(chf.OpRelease, "imsi-1", "time", seq, data(0)), ok(0)) // its release opens and closes a record
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs := decodeDir(t, dir)
	causes := map[string][]int64{}
	var charged int64
	for _, rec := range rs {
		causes[rec.Session] = append(causes[rec.Session], rec.Cause)
		charged += rec.Charged
	}
	if len(rs) != 4 || causes["vol"][0] != int64(CauseVolumeLimit) || causes["cnt"][0] != int64(CauseMaxChangeCond) ||
		len(causes["time"]) != 2 || causes["time"][0] != int64(CauseTimeLimit) || causes["time"][1] != int64(CauseNormalRelease) {
		t.Fatalf("records by session: %v", causes)
	}
	if charged != want {
		t.Fatalf("records charge %d, requests debited %d", charged, want)
	}
}

// TestRecorderConcurrentNothingLost charges many sessions from several
// goroutines and closes: every debit is in exactly one record.
func TestRecorderConcurrentNothingLost(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileSize = 4096
	r, _, dir := newRecorder(t, cfg)
	var wg sync.WaitGroup
	const workers, sessions = 4, 200
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sessions {
				s := string(rune('a'+w)) + strings.Repeat("x", i%7) + string(rune('0'+i%10)) + string(rune('A'+i/10))
				r.Charged(apply(chf.OpCreate, "imsi-1", s, 0, data(0)), &chf.ChargeResponse{})
				r.Charged(apply(chf.OpUpdate, "imsi-1", s, 1, data(2_000_000)), &chf.ChargeResponse{Charged: 2})
				if i%2 == 0 {
					r.Charged(apply(chf.OpRelease, "imsi-1", s, 2, data(1_000_000)), &chf.ChargeResponse{Charged: 1})
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs := decodeDir(t, dir)
	var charged int64
	for _, rec := range rs {
		charged += rec.Charged
	}
	if want := int64(workers * sessions * 5 / 2); charged != want || len(rs) != workers*sessions {
		t.Fatalf("%d records charging %d, want %d records charging %d", len(rs), charged, workers*sessions, want)
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(mod func(*Config), want string) {
		t.Helper()
		c := DefaultConfig()
		c.Dir = "/tmp/x"
		mod(&c)
		err := c.Validate()
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Fatalf("Validate: %v, want %q", err, want)
		}
	}
	f(func(*Config) {}, "")
	f(func(c *Config) { c.Fsync = "sometimes" }, "--cdr-fsync")
	f(func(c *Config) { c.FileSize = 0 }, "--cdr-file-size")
	f(func(c *Config) { c.PartialTime = 0 }, "--cdr-partial-time")
	f(func(c *Config) { c.PartialContainers = 65 }, "--cdr-partial-containers")
	f(func(c *Config) { c.Node = "a/b" }, "--cdr-node")
	f(func(c *Config) { c.Dir, c.Fsync = "", "sometimes" }, "") // off: not checked
}

func BenchmarkAppendCHFRecord(b *testing.B) {
	r := Record{Node: "ocp-0", SUPI: "imsi-001010000000001", Session: "0123456789abcdef", Opened: t0, Sequence: 1,
		Charged: 12, Currency: "EUR", Usage: []Usage{{RatingGroup: 10, Service: chf.ServiceData, Units: 5_000_000, Seq: 1, At: t0},
			{RatingGroup: 10, Service: chf.ServiceData, Units: 7_000_000, Seq: 2, At: t0}}}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCHFRecord(buf[:0], &r)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkRecorderSession is one create, two updates and a release
// through the Recorder into files (FsyncRotate).
func BenchmarkRecorderSession(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Dir, cfg.Node = b.TempDir(), "bench"
	r, err := NewRecorder(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ars := []*chf.ApplyRequest{apply(chf.OpCreate, "imsi-001010000000001", "", 0, data(0)),
		apply(chf.OpUpdate, "imsi-001010000000001", "", 1, data(3_000_000)),
		apply(chf.OpUpdate, "imsi-001010000000001", "", 2, data(3_000_000)),
		apply(chf.OpRelease, "imsi-001010000000001", "", 3, data(1_000_000))}
	resp := &chf.ChargeResponse{Charged: 3, Currency: "EUR"}
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = strings.Repeat("s", 8) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for _, ar := range ars {
			ar.Session = ids[i%len(ids)]
			r.Charged(ar, resp)
		}
		i++
	}
	b.StopTimer()
	r.Close(context.Background())
	st := r.Writer().Stats()
	b.ReportMetric(float64(st.Bytes)/float64(st.Records), "B/record")
}

// TestRecorderReplayRecords: a replay (an answer marked Replayed, with
// the first answer's charge) is recorded by a recorder that has no
// record of its request, as a replay record, and by none that has; the
// collector rule then counts every request once, whichever pod saw which
// answer. Pod a: the first answers of a session's create and update 1,
// and of an event; update 1's answer is lost on its way to the client,
// whose retry reaches pod b. Update 2's answer is lost between the ABM
// and pod b (b recorded nothing): its retry, replayed, lands on b again.
// The release's first answer reaches b; its retry is replayed on both.
func TestRecorderReplayRecords(t *testing.T) {
	a, _, dirA := newRecorder(t, DefaultConfig())
	b, _, dirB := newRecorder(t, DefaultConfig())
	ok := func(c int64) *chf.ChargeResponse {
		return &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: c, Currency: "EUR"}
	}
	replay := func(c int64) *chf.ChargeResponse {
		return &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: c, Currency: "EUR", Replayed: true}
	}
	a.Charged(apply(chf.OpCreate, "imsi-1", "s1", 0, data(0)), ok(0))
	a.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 1, data(3_000_000)), ok(3))
	a.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 1, data(3_000_000)), replay(3)) // a has it: nothing
	b.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 1, data(3_000_000)), replay(3)) // b has not: a replay record
	// update 2: the ABM applied it, its answer never reached b
	b.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 2, data(1_000_000)), replay(1))
	b.Charged(apply(chf.OpUpdate, "imsi-1", "s1", 2, data(1_000_000)), replay(1)) // b has it now: nothing
	b.Charged(apply(chf.OpRelease, "imsi-1", "s1", 3, data(2_000_000)), ok(2))
	a.Charged(apply(chf.OpRelease, "imsi-1", "s1", 3, data(2_000_000)), replay(2)) // closes a's record
	b.Charged(apply(chf.OpRelease, "imsi-1", "s1", 3, data(2_000_000)), replay(2)) // b has it: nothing
	// a Nchf event (no session: its Key is its identity), and its retry on b
	sms := chf.RatedLine{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: 5}
	ev := apply(chf.OpEvent, "imsi-2", "", 0, sms)
	ev.Key = 0xfeed
	a.Charged(ev, ok(5))
	a.Charged(ev, replay(5)) // a has it: nothing
	b.Charged(ev, replay(5))
	// a Nchf create whose answer was lost before a saw it: the client's
	// retry carries a new session id, the ABM answers the first one's
	c := apply(chf.OpCreate, "imsi-3", "s3-retry", 1, data(4_000_000))
	a.Charged(c, &chf.ChargeResponse{Result: chf.ResultSuccess, Charged: 4, Currency: "EUR", Session: "s3", Replayed: true})
	a.Charged(apply(chf.OpRelease, "imsi-3", "s3", 2, data(0)), ok(0))
	for _, r := range []*Recorder{a, b} {
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ra, rb := decodeDir(t, dirA), decodeDir(t, dirB)
	all := append(append([]cdrtest.Record{}, ra...), rb...)
	replays := map[string]int{}
	for _, r := range all {
		if r.Replay {
			replays[fmt.Sprintf("%s/%s/%d", r.SUPI, r.Session, r.ReplaySeq)]++
			if !r.HasCharged || len(r.Usage) != 1 || r.Usage[0].Seq != r.ReplaySeq {
				t.Fatalf("replay record %+v", r)
			}
		}
	}
	want := map[string]int{"imsi-1/s1/1": 1, "imsi-1/s1/2": 1, "imsi-1/s1/3": 1, "imsi-2/ev-000000000000feed/0": 1, "imsi-3/s3/1": 1}
	if !maps.Equal(replays, want) {
		t.Fatalf("replay records %v, want %v\na %+v\nb %+v", replays, want, ra, rb)
	}
	kept, dropped := collector.Collect(all)
	var charged, volume int64
	for _, r := range kept {
		charged += r.Charged
		for _, u := range r.Usage {
			volume += u.Volume
		}
	}
	if charged != 3+1+2+5+4 || volume != 3_000_000+1_000_000+2_000_000+4_000_000 || dropped != 3 {
		t.Fatalf("collected records charge %d for %d octets with %d dropped, want 15 for 10000000 with 3 (each request once): a %+v, b %+v",
			charged, volume, dropped, ra, rb)
	}
}
