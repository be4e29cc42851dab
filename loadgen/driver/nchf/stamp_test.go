package nchf

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// TestSenderTimestampFormatAllocs: the 3gpp-Sbi-Sender-Timestamp value is
// TS 29.500's (what time.Format gives with the layout), and neither
// formatting nor the per-millisecond cache allocates.
func TestSenderTimestampFormatAllocs(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 123_456_789, time.UTC)
	if got := string(AppendSenderTimestamp(nil, at)); got != "Tue, 01 Dec 2026 14:00:00.123 GMT" {
		t.Fatalf("got %q", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		v := time.Unix(rng.Int64N(4_000_000_000), rng.Int64N(1e9)).In(time.FixedZone("x", 3600*5))
		if got, want := string(AppendSenderTimestamp(nil, v)), v.UTC().Format(senderTimestampLayout); got != want {
			t.Fatalf("%v: got %q, want %q", v, got, want)
		}
	}
	var s stamp
	now := at
	s.at(now)
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond) // a new millisecond each time: formatted each time
		s.at(now)
	}); n != 0 {
		t.Fatalf("stamp.at allocates %v times per call", n)
	}
	if got := string(s.at(now)); got != now.UTC().Format(senderTimestampLayout) {
		t.Fatalf("cached %q, want %q", got, now.UTC().Format(senderTimestampLayout))
	}
}

// TestSenderTimestampSent: every request of the h2c drivers and of http1
// carries the sender timestamp, the time it was sent to the millisecond.
func TestSenderTimestampSent(t *testing.T) {
	check := func(proto, v string, before time.Time) {
		t.Helper()
		at, err := time.Parse(senderTimestampLayout, v)
		if err != nil {
			t.Fatalf("%s: 3gpp-Sbi-Sender-Timestamp %q: %v", proto, v, err)
		}
		if at.Before(before.Truncate(time.Millisecond)) || at.After(time.Now()) {
			t.Fatalf("%s: sender timestamp %v, sent between %v and now", proto, at, before)
		}
	}
	seen := make(chan string, 1)
	addr, _ := startH2C(t, 4, func(w *h2c.Response, r *h2c.Request) {
		seen <- string(r.Header(SenderTimestampHeader))
		w.SetStatus(200)
		w.WriteString(`{}`)
	})
	for _, proto := range []string{"h2c", "h2c-async"} {
		_, l := newLoop(t, proto, addr, 1)
		before := time.Now()
		var c driver.Charge
		c.Op, c.SUPI = driver.ChargeBalance, []byte("imsi-001010000000001")
		var o driver.Outcome
		done := false
		if err := l.Queue(&c, &o, func(error) { done = true }); err != nil {
			t.Fatal(err)
		}
		l.Flush()
		pollUntil(t, l, 5*time.Millisecond, func() bool { return done })
		check(proto, <-seen, before)
		l.Close()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("3gpp-Sbi-Sender-Timestamp")
		w.Write([]byte(`{}`))
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	d, err := New(driver.Config{Proto: "http1", Targets: []string{ln.Addr().String()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := time.Now()
	c := driver.Charge{Op: driver.ChargeBalance, SUPI: []byte("imsi-001010000000001")}
	var o driver.Outcome
	errc := make(chan error, 1)
	if err := w.Queue(&c, &o, func(err error) { errc <- err }); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if err := w.Poll(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
			check("http1", <-seen, before)
			return
		case <-ctx.Done():
			t.Fatal("no answer")
		default:
		}
	}
}

// TestInvocationTimestampFormat: the hand-made format is AppendFormat's,
// for times across years, leap days, every nanosecond digit and zones
// other than UTC.
func TestInvocationTimestampFormat(t *testing.T) {
	const layout = "2006-01-02T15:04:05.000000000Z"
	rng := rand.New(rand.NewPCG(5, 6))
	zone := time.FixedZone("X", -7*3600-1800)
	times := []time.Time{
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 0, 30, 0, 0, zone),
	}
	for range 10000 {
		times = append(times, time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).In(zone))
	}
	for _, tm := range times {
		want := tm.UTC().AppendFormat(nil, layout)
		if got := appendInvocationTimestamp(nil, tm); string(got) != string(want) {
			t.Fatalf("%v: got %q, want %q", tm, got, want)
		}
	}
	buf := make([]byte, 0, 64)
	now := time.Now()
	if a := testing.AllocsPerRun(100, func() { buf = appendInvocationTimestamp(buf[:0], now) }); a != 0 {
		t.Fatalf("appendInvocationTimestamp allocates %.1f times, want 0", a)
	}
}
