//go:build linux && (amd64 || arm64)

package nchf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// startH2C serves handler on a loopback port with the given stream limit;
// close stops it (connections included).
func startH2C(t *testing.T, maxStreams uint32, handler h2c.Handler) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2c.Server{Handler: handler, MaxConcurrentStreams: maxStreams}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func newLoop(t *testing.T, proto, addr string, conns int) (*Driver, driver.Worker) {
	t.Helper()
	d, err := New(driver.Config{Proto: proto, Targets: []string{addr}, Conns: conns, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	l, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

// pollUntil polls l until cond holds (fails the test after 5 s).
func pollUntil(t *testing.T, l driver.Worker, wait time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out polling the loop")
		}
		if err := l.Poll(wait); err != nil {
			t.Fatal(err)
		}
	}
}

// chargeHandler answers creates with 201, a Location naming the SUPI and
// X-Chf-Charged 7; a SUPI ending in 999 is held until hold closes, others
// until first closes.
func chargeHandler(first, hold chan struct{}) h2c.Handler {
	return func(w *h2c.Response, r *h2c.Request) {
		var body struct {
			SUPI string `json:"subscriberIdentifier"`
		}
		json.Unmarshal(r.Body, &body)
		if strings.HasSuffix(body.SUPI, "999") {
			<-hold
		} else {
			<-first
		}
		w.SetHeader("content-type", "application/json")
		w.AddHeaderBytes("location", []byte("http://cgw"+PathCreate+"/"+body.SUPI+".1"))
		w.AddHeaderInt("x-chf-charged", 7)
		w.SetStatus(201)
		w.WriteString(`{"multipleUnitInformation":[{"resultCode":"SUCCESS"}]}`)
	}
}

// The loop sends queued requests in one flush, dials another connection
// when the first is at the server's stream limit, completes every request
// on the polling goroutine with its arrival time, and fails what is in
// flight when the server goes away.
func TestLoop(t *testing.T) {
	for _, wait := range []time.Duration{5 * time.Millisecond, driver.SleepThrough} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			first, hold := make(chan struct{}), make(chan struct{})
			addr, stop := startH2C(t, 4, chargeHandler(first, hold))
			_, l := newLoop(t, "h2c", addr, 3)
			defer l.Close()
			const n = 10 // 3 connections x 4 streams hold them
			charges := make([]driver.Charge, n)
			outs := make([]driver.Outcome, n)
			errs := make([]error, n)
			var done int
			for i := range n {
				charges[i] = driver.Charge{Op: driver.ChargeCreate, SUPI: []byte("imsi-00101000000000" + strconv.Itoa(i)), RatingGroup: 10, Request: true}
				i := i
				if err := l.Queue(&charges[i], &outs[i], func(err error) { errs[i] = err; done++ }); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			l.Flush()
			// The server holds the answers: the requests fill 3
			// connections.
			pollUntil(t, l, wait, func() bool { return len(l.(*loop).live) == 3 })
			close(first)
			pollUntil(t, l, wait, func() bool { return done == n })
			for i, o := range outs {
				want := "imsi-00101000000000" + strconv.Itoa(i) + ".1"
				if errs[i] != nil || o.Class != "" || string(o.Ref) != want || !o.HasCharged || o.Charged != 7 || !o.Resolved {
					t.Fatalf("request %d: err %v outcome %+v (ref %q)", i, errs[i], o, o.Ref)
				}
				if o.Received.IsZero() || o.Received.After(time.Now()) {
					t.Fatalf("request %d: arrival time %v", i, o.Received)
				}
			}
			// More than 3 x 4 requests in flight: the last is refused.
			var held int
			var heldErrs []error
			for i := range 13 {
				var o driver.Outcome
				c := driver.Charge{Op: driver.ChargeCreate, SUPI: []byte("imsi-001010000000999")}
				err := l.Queue(&c, &o, func(err error) { heldErrs = append(heldErrs, err); held-- })
				if i < 12 && err != nil {
					t.Fatalf("held request %d: %v", i, err)
				}
				if i == 12 && !errors.Is(err, driver.ErrConnection) {
					t.Fatalf("request beyond every stream limit: %v, want ErrConnection", err)
				}
				if err == nil {
					held++
				}
			}
			l.Flush()
			// The server goes away: every held request fails as a
			// connection error, on this goroutine.
			go func() { time.Sleep(50 * time.Millisecond); close(hold); stop() }()
			pollUntil(t, l, wait, func() bool { return held == 0 })
			for _, err := range heldErrs {
				if err != nil && !errors.Is(err, driver.ErrConnection) {
					t.Fatalf("held request failed with %v, want ErrConnection", err)
				}
			}
		})
	}
}

// A response read at the end of a slept-through wait still carries the
// time it arrived, not the time the loop handled it.
func TestLoopArrivalTime(t *testing.T) {
	addr, _ := startH2C(t, 100, func(w *h2c.Response, r *h2c.Request) { w.WriteString("{}") })
	_, l := newLoop(t, "h2c", addr, 1)
	defer l.Close()
	var done bool
	var o driver.Outcome
	c := driver.Charge{Op: driver.ChargeBalance, SUPI: []byte("imsi-1")}
	warm := func() {
		done = false
		if err := l.Queue(&c, &o, func(error) { done = true }); err != nil {
			t.Fatal(err)
		}
		l.Flush()
	}
	warm()
	pollUntil(t, l, 5*time.Millisecond, func() bool { return done })
	// The loop sleeps through SleepThrough before it reads; a response
	// that reached the socket well before that must carry its arrival
	// time, not the time the loop handled it. On a loaded machine the
	// server may answer late (just before the loop wakes): such attempts
	// prove nothing and are tried again.
	const sleep = driver.SleepThrough
	var last string
	for range 8 {
		sent := time.Now()
		warm()
		if err := l.Poll(sleep); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, l, sleep, func() bool { return done })
		handled := time.Now()
		if o.Received.Before(sent) || o.Received.After(handled) {
			t.Fatalf("arrival %v after the send, outside [send, handled %v]", o.Received.Sub(sent), handled.Sub(sent))
		}
		if handled.Sub(o.Received) >= sleep/4 {
			return // stamped well before it was handled: the arrival time
		}
		last = fmt.Sprintf("arrival %v after the send, handled %v after", o.Received.Sub(sent), handled.Sub(sent))
	}
	t.Fatalf("in 8 attempts the arrival time was never well before the handling time (last: %s): it is the handling time", last)
}

// "h2c-async" keeps the connections' goroutines: no event loop.
func TestAsyncHasNoLoop(t *testing.T) {
	d, err := New(driver.Config{Proto: "h2c-async", Targets: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, ok := w.(*driver.Pool); !ok {
		t.Fatalf("h2c-async worker %T, want a driver.Pool", w)
	}
}

// A balance read from a server that completes the HTTP/2 handshake and
// never answers ends with a timeout after the driver's timeout.
func TestReadAccountBounded(t *testing.T) {
	addr, _ := startH2C(t, 100, func(w *h2c.Response, r *h2c.Request) { time.Sleep(2 * time.Second) })
	for _, proto := range []string{"h2c", "h2c-async"} {
		d, err := New(driver.Config{Proto: proto, Targets: []string{addr}, Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = d.NewAccountReader().ReadAccount(context.Background(), 0, []byte("imsi-1"))
		if !errors.Is(err, driver.ErrTimeout) || time.Since(t0) > time.Second {
			t.Errorf("%s: %v after %v, want a timeout after 100ms", proto, err, time.Since(t0))
		}
		d.Close()
	}
}

// sleepUntil never returns before the time asked, learns the kernel's
// wake-up lateness (loop.early stays within maxEarly); how much closer
// to the time it lands than a plain nanosleep of the same length is
// logged (it asks early and spins the rest).
func TestSleepUntil(t *testing.T) {
	l := &loop{d: &Driver{onTime: true}}
	const n, wait = 300, 150 * time.Microsecond
	var lateSum, plainSum time.Duration
	for i := 0; i < n; i++ {
		end := time.Now().Add(wait)
		l.sleepUntil(end)
		late := time.Since(end)
		if late < 0 {
			t.Fatalf("returned %v before the time asked", -late)
		}
		if l.early < 0 || l.early > maxEarly {
			t.Fatalf("early %v outside 0..%v", l.early, maxEarly)
		}
		if i >= n/2 { // after learning
			lateSum += late
			t0 := time.Now()
			ts := syscall.NsecToTimespec(int64(wait))
			syscall.Nanosleep(&ts, nil)
			plainSum += time.Since(t0) - wait
		}
	}
	// How much closer it lands than a plain nanosleep is a timing figure
	// (it depends on the machine's load), so it is logged, not asserted;
	// the loadgen's sched_lag_ms shows it in real runs.
	t.Logf("mean lateness: sleepUntil %v, nanosleep %v; early %v", lateSum/(n/2), plainSum/(n/2), l.early)
}

// TestMaxRspTimeSent: every request tells the CHF how long it may take,
// less than the driver waits, so that its answer arrives in time.
func TestMaxRspTimeSent(t *testing.T) {
	if got := MaxRspTime(2 * time.Second); got != 1500*time.Millisecond {
		t.Fatalf("MaxRspTime(2s) = %s, want 1.5s", got)
	}
	if got := MaxRspTime(10 * time.Second); got != 9*time.Second {
		t.Fatalf("MaxRspTime(10s) = %s, want 9s", got)
	}
	seen := make(chan string, 1)
	addr, _ := startH2C(t, 4, func(w *h2c.Response, r *h2c.Request) {
		seen <- string(r.Header(MaxRspTimeHeader))
		w.SetStatus(200)
		w.WriteString(`{}`)
	})
	for _, proto := range []string{"h2c", "h2c-async"} {
		_, l := newLoop(t, proto, addr, 1)
		var c driver.Charge
		c.Op, c.SUPI = driver.ChargeBalance, []byte("imsi-001010000000001")
		var o driver.Outcome
		done := false
		if err := l.Queue(&c, &o, func(error) { done = true }); err != nil {
			t.Fatal(err)
		}
		l.Flush()
		pollUntil(t, l, 5*time.Millisecond, func() bool { return done })
		if got := <-seen; got != "1500" {
			t.Fatalf("%s: 3gpp-Sbi-Max-Rsp-Time %q, want 1500 (ms, for a 2s timeout)", proto, got)
		}
		l.Close()
	}
}
