package compare

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/report"
)

func result(label string, tps, p99, jitter, us float64, cpu map[string]float64) *report.Result {
	secs := map[string]float64{}
	for k, v := range cpu {
		secs[k] = v / 10
	}
	return &report.Result{SchemaVersion: report.SchemaVersion, Label: label, TPS: tps, OfferedTPS: tps * 1.01, JitterCV: jitter,
		DurationS: 10, Transactions: int64(tps * 10),
		LatencyMs: report.Latency{P50: p99 / 4, P99: p99, P999: p99 * 2}, SUTCPUUsTxn: us, CPUPercent: cpu, CPUSeconds: secs}
}

func load(t *testing.T, rs ...*report.Result) []Run {
	t.Helper()
	dir := t.TempDir()
	var runs []Run
	for _, r := range rs {
		path := filepath.Join(dir, r.Label+".json")
		if err := r.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		run, err := Load(path, "")
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

func TestRatios(t *testing.T) {
	a := result("calico", 50000, 4, 0.5, 200, map[string]float64{"cgw": 40, "loadgen": 30})
	b := result("sriov", 70000, 2, 0.25, 150, map[string]float64{"cgw": 45, "loadgen": 35})
	runs := load(t, a, b)
	tab, err := New(runs, 0)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	tab.WriteMarkdown(&md)
	for _, want := range []string{
		"| run | offered TPS | TPS | ×TPS | p50 ms | p99 ms | ×p99 | p99.9 ms | jitter CV | ×jitter | SUT µs/txn | ×µs/txn | CPU % cgw | CPU % loadgen |",
		"| calico | 50500 | 50000 | 1.00 | 1.000 | 4.000 | 1.00 | 8.000 | 0.500 | 1.00 | 200.0 | 1.00 | 40.0 | 30.0 |",
		"| sriov | 70700 | 70000 | 1.40 | 0.500 | 2.000 | 0.50 | 4.000 | 0.250 | 0.50 | 150.0 | 0.75 | 45.0 | 35.0 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, md.String())
		}
	}
	var html bytes.Buffer
	if err := tab.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), "<svg"); n != 4 {
		t.Fatalf("%d charts, want 4 grouped bar charts", n)
	}
	if _, err := New(runs, 2); err == nil {
		t.Fatal("baseline out of range accepted")
	}
}

// A figure a run lacks (no SUT CPU source, no offered rate, no answered
// transaction) is n/a, never 0, and no ratio is computed against it.
func TestMissingFiguresAreNA(t *testing.T) {
	a := result("no-sut-cpu", 1000, 4, 0.5, 0, map[string]float64{"loadgen": 30})
	a.OfferedTPS = 0
	b := result("full", 2000, 2, 0.25, 150, map[string]float64{"cgw": 45, "loadgen": 35})
	c := result("nothing-answered", 0, 0, 0, 0, nil)
	c.Transactions = 0
	tab, err := New(load(t, a, b, c), 0)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	tab.WriteMarkdown(&md)
	for _, want := range []string{
		"| no-sut-cpu | n/a | 1000 | 1.00 | 1.000 | 4.000 | 1.00 | 8.000 | 0.500 | 1.00 | n/a | n/a | n/a | 30.0 |",
		"| full | 2020 | 2000 | 2.00 | 0.500 | 2.000 | 0.50 | 4.000 | 0.250 | 0.50 | 150.0 | n/a | 45.0 | 35.0 |",
		"| nothing-answered | n/a | 0 | 0.00 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, md.String())
		}
	}
	if _, ok := Ratio(Figure{1, true}, Figure{0, true}); ok {
		t.Fatal("a ratio against 0")
	}
}

func TestFindBaseline(t *testing.T) {
	runs := []Run{{Label: "bare metal"}, {Label: "bare metal pinned"}, {Label: "2"}, {Label: "sriov"}}
	f := func(sel string, want int) {
		t.Helper()
		got, err := FindBaseline(runs, sel)
		if err != nil || got != want {
			t.Fatalf("--baseline %q: %d %v, want %d", sel, got, err, want)
		}
	}
	f("", 0)
	f("bare metal pinned", 1)
	f("sriov", 3)
	f("1", 1)
	f("2", 2) // a label wins over an index
	for _, bad := range []string{"calico", "4", "-1"} {
		if _, err := FindBaseline(runs, bad); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), `1="bare metal pinned"`) {
			t.Fatalf("--baseline %q: err = %v", bad, err)
		}
	}
}

// TestHostNote: runs that gave the loadgen the same work get the host
// check, with each run's loadgen CPU and SUT ÷ loadgen ratio; runs that
// did not (another loadgen build, another scenario, unlike loads, no
// loadgen CPU) get none.
func TestHostNote(t *testing.T) {
	mk := func(label string, sut, lg float64) *report.Result {
		r := result(label, 1000, 2, 0.3, sut, map[string]float64{"cgw": 8, "loadgen": 6})
		r.LoadgenUsTxn, r.Proto = lg, "h2c"
		r.Provenance.LoadgenVersion, r.Provenance.ScenarioHash = "d82b7b6", "ec77701768c6f8ff"
		return r
	}
	note := func(rs ...*report.Result) string {
		t.Helper()
		tab, err := New(load(t, rs...), 0)
		if err != nil {
			t.Fatal(err)
		}
		var md bytes.Buffer
		tab.WriteMarkdown(&md)
		for _, l := range strings.Split(md.String(), "\n") {
			if strings.HasPrefix(l, "Host check: ") {
				return l
			}
		}
		return ""
	}
	got := note(mk("old", 241.6, 62.6), mk("new", 258.0, 68.8))
	for _, want := range []string{"build d82b7b6, scenario ec77701768c6f8ff, h2c", "62.6 (old), 68.8 (new) µs: 10% apart", "SUT µs/txn ÷ loadgen µs/txn: 3.86 (old), 3.75 (new)."} {
		if !strings.Contains(got, want) {
			t.Fatalf("host check %q lacks %q", got, want)
		}
	}
	if got := note(mk("a", 250, 65.0), mk("b", 252, 66.0)); !strings.Contains(got, "within 1.5%: by this measure the host ran at the same speed") {
		t.Fatalf("host check %q", got)
	}
	other := mk("other-build", 250, 65)
	other.Provenance.LoadgenVersion = "164d04d"
	otherScenario := mk("busy-hour", 250, 65)
	otherScenario.Provenance.ScenarioHash = "0123"
	faster := mk("faster", 250, 65)
	faster.OfferedTPS *= 2
	noCPU := mk("no-loadgen-cpu", 250, 0)
	for _, r := range []*report.Result{other, otherScenario, faster, noCPU} {
		if got := note(mk("base", 250, 65), r); got != "" {
			t.Fatalf("with %s: host check %q, want none", r.Label, got)
		}
	}
}
