package scenario

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// The shipped busy-hour scenario is valid, found by name from any
// directory, and has about a million sessions open at its rate.
func TestBusyHour(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	s, err := Open("busy-hour")
	if err != nil {
		t.Fatal(err)
	}
	if s.Subscribers.Count != 20_000_000 {
		t.Fatalf("subscribers %d, want 20,000,000", s.Subscribers.Count)
	}
	if open := s.OpenSessions(); open < 0.9e6 || open > 1.1e6 {
		t.Fatalf("%.0f sessions open at %v TPS, want about 1,000,000", open, s.Load.TPS)
	}
	d, v := s.PrefillSessions()
	if open := s.OpenSessions(); float64(d+v) > open || float64(d+v) < 0.7*open {
		t.Fatalf("steady start opens %d+%d sessions of the %.0f open", d, v, open)
	}
	if m := s.Data.MeanLength().Minutes(); math.Abs(m-17.5) > 0.05 {
		t.Fatalf("mean data session %.2f min, want 17.5", m)
	}
	if _, err := Open("no-such-scenario"); err == nil {
		t.Fatal("an unknown name was accepted")
	}
}

func TestLengthValidation(t *testing.T) {
	f := func(yaml, field string) {
		t.Helper()
		_, err := Parse([]byte(yaml))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("%q: error %v, want one naming %s", yaml, err, field)
		}
	}
	f("data: {length: {min: 0s, max: 1m}}", "data.length")
	f("data: {length: {min: 2m, max: 1m}}", "data.length")
	f("data: {length: {dist: gauss, min: 1m, max: 2m}}", "data.length.dist")
	f("voice: {length: {dist: exponential, min: 1m, max: 2m}}", "voice.length.mean")
	f("data: {think_time: 0s, length: {min: 1m, max: 2m}}", "data.think_time")
	f("subscribers: {popularity: zipf}", "subscribers.zipf_s")
	f("subscribers: {popularity: pareto}", "subscribers.popularity")
	f("subscribers: {zipf_s: 1}", "subscribers.zipf_s")
	f("max_open_sessions: 0", "max_open_sessions")
}

// Updates fall at every think time before the session's length; the
// means follow the distribution.
func TestUpdatesFor(t *testing.T) {
	s := Session{ThinkTime: Duration(60e9)}
	for _, c := range []struct {
		l    float64 // seconds
		want int
	}{{30, 0}, {60, 0}, {60.5, 1}, {300, 4}, {301, 5}} {
		if got := s.UpdatesFor(Duration(c.l * 1e9).D()); got != c.want {
			t.Errorf("length %vs: %d updates, want %d", c.l, got, c.want)
		}
	}
	s.Length = &Length{Min: Duration(300e9), Max: Duration(1800e9)}
	// uniform 5..30 min at one a minute: (L-1ns)/60s floored, mean 17.0
	if m := s.MeanUpdates(); math.Abs(m-17.0) > 0.05 {
		t.Fatalf("mean updates %.3f, want 17.0", m)
	}
}

// Zipf picks follow 1/r^s: the most popular subscriber's share of the
// picks matches Share, ranks map to distinct indexes, and every pick is
// in range.
func TestZipfPicker(t *testing.T) {
	sub := Subscribers{First: "imsi-001010000000001", Count: 1000, Popularity: "zipf", ZipfS: 1.1}
	p := sub.Picker()
	seen := map[int]bool{}
	for r := range sub.Count {
		i := p.Index(r)
		if i < 0 || i >= sub.Count || seen[i] {
			t.Fatalf("rank %d → index %d: not a bijection of the range", r, i)
		}
		seen[i] = true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	var top, sum int
	for range n {
		i := p.Pick(rng)
		if i < 0 || i >= sub.Count {
			t.Fatalf("pick %d out of range", i)
		}
		if i == p.Index(0) {
			top++
		}
		sum += i
	}
	want := p.Share(0) * n
	if math.Abs(float64(top)-want) > 5*math.Sqrt(want) {
		t.Fatalf("top subscriber picked %d times, want %.0f", top, want)
	}
	// the shares of all ranks add up to one
	var total float64
	for r := range sub.Count {
		total += p.Share(r)
	}
	if math.Abs(total-1) > 1e-9 {
		t.Fatalf("shares sum to %v", total)
	}
	// and uniform is uniform
	u := Subscribers{Count: 1000}
	if got := u.Picker().Share(3); got != 1.0/1000 {
		t.Fatalf("uniform share %v", got)
	}
}

// TestSteadyStartNeedsAThinkTime: with steady_start the ramp-up must hold
// one think time of the kinds in the mix, or the window would not see the
// steady update rate; a kind not in the mix does not count.
func TestSteadyStartNeedsAThinkTime(t *testing.T) {
	s, err := Open("busy-hour")
	if err != nil {
		t.Fatal(err)
	}
	s.Phases.RampUp = Duration(5e9)
	var fe *FieldError
	if err := s.Validate(); err == nil || !errors.As(err, &fe) || fe.Field != "phases.ramp_up" || !strings.Contains(err.Error(), "1m0s") {
		t.Fatalf("busy-hour with a 5 s ramp-up: %v, want an error on phases.ramp_up naming the 60 s think time", err)
	}
	s.Phases.RampUp = s.Data.ThinkTime
	if err := s.Validate(); err != nil {
		t.Fatalf("a ramp-up of one think time: %v", err)
	}
	s.Mix = Mix{SMS: 1}
	s.Phases.RampUp = Duration(5e9)
	if err := s.Validate(); err != nil {
		t.Fatalf("no sessions in the mix: %v", err)
	}
}
