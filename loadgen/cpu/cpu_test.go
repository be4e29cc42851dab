package cpu

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := "1234 (chf cgw) S 1000 1234 1000 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 0 0\n"
	s, err := parseStat(1234, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s.ppid != 1000 || s.comm != "chf cgw" || s.cpu != 3.0 {
		t.Fatalf("parsed %+v", s)
	}
	if _, err := parseStat(1, []byte("garbage")); err == nil {
		t.Fatal("accepted garbage")
	}
}

func TestParseProcessCPU(t *testing.T) {
	text := "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\ngo_goroutines 9\n"
	v, err := ParseProcessCPU(strings.NewReader(text))
	if err != nil || v != 12.5 {
		t.Fatalf("got %v, %v", v, err)
	}
	if _, err := ParseProcessCPU(strings.NewReader("go_goroutines 9\n")); err == nil {
		t.Fatal("no counter accepted")
	}
}

func TestSelfAndPercent(t *testing.T) {
	s := NewSampler(Self("loadgen"), NewProc("gone", 1<<30), NewProc("half", os.Getpid(), 1<<30))
	a := s.Sample(context.Background())
	// Burn CPU until the kernel's 10 ms ticks show some (a busy shared
	// machine may not run this goroutine at once).
	var b Sample
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
		}
		if b = s.Sample(context.Background()); b.Seconds["loadgen"] > a.Seconds["loadgen"] {
			break
		}
	}
	if _, ok := b.Seconds["gone"]; ok {
		t.Fatal("a dead process was sampled")
	}
	// One process of two gone: no silently smaller sum, an error naming it.
	if _, ok := b.Seconds["half"]; ok || strings.Join(b.Failed, ",") != "gone,half" || !errors.Is(b.Err, ErrGone) {
		t.Fatalf("failed %v, err %v; want gone and half failed with ErrGone", b.Failed, b.Err)
	}
	if p := Percent(a, b)["loadgen"]; p <= 0 || p > 100*float64(64) {
		t.Fatalf("loadgen CPU %v%%", p)
	}
}

func TestParseSpec(t *testing.T) {
	f := func(spec, name string, ok bool) {
		t.Helper()
		src, err := ParseSpec(spec)
		if ok != (err == nil) {
			t.Fatalf("%q: err %v", spec, err)
		}
		if ok && src.Name() != name {
			t.Fatalf("%q: name %q", spec, src.Name())
		}
	}
	f("cgw=pid:"+itoa(os.Getpid()), "cgw", true)
	f("cgw=http://127.0.0.1:8080/metrics", "cgw", true)
	f("cgw=pid:x", "", false)
	f("cgw=ftp://x", "", false)
	f("no-such-process-name-xyz", "", false)
	f("=pid:1", "", false)
	f("cgw=pid:0", "", false)
	if _, err := ParseSpec("cgw=proc:no-such-process-name-xyz"); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("no such process: err = %v, want ErrNoProcess", err)
	}
	m := NewMissing("cgw", ErrNoProcess)
	if _, err := m.Seconds(context.Background()); !errors.Is(err, ErrNoProcess) || m.Name() != "cgw" {
		t.Fatalf("missing source: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
