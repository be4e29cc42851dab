package report

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func TestLogTicksLabelDecades(t *testing.T) {
	f := func(min, max float64, want ...string) {
		t.Helper()
		var got []string
		for _, tk := range (LogTicks{}).Ticks(min, max) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("ticks %v..%v: labels %q, want %q", min, max, got, want)
		}
	}
	f(0.1, 1000, "0.1", "1", "10", "100", "1000")
	f(1, 100, "1", "2", "5", "10", "20", "50", "100") // two decades: 2 and 5 too
	if lo, hi := decades(0.3, 4); lo != 0.1 || hi != 10 {
		t.Errorf("decades(0.3, 4) = %v..%v, want 0.1..10", lo, hi)
	}
}

// result returns a small run with a per-second series.
func result(t *testing.T) *Result {
	t.Helper()
	st := statsOf([]sample{{op: engine.OpCreate, lat: 2 * time.Millisecond, svc: time.Millisecond}, {op: engine.OpBalance, lat: time.Millisecond, svc: time.Millisecond, err: true}}, time.Second)
	series := []Point{
		{Tick: engine.Tick{Second: 0, Phase: "ramp-up", Offered: 2, Completed: 2, P50: 1, P99: 2, ServiceP50: 1, ServiceP99: 1.5, SchedLagP99: 0.05,
			OpCompleted: map[string]int64{"create": 1, "balance": 1}, OpErrors: map[string]int64{"balance": 1}, ErrorClasses: map[string]int64{"http_500": 1}}},
		{Tick: engine.Tick{Second: 1, Phase: "measure", Offered: 2, Completed: 2, P50: 1, P99: 2, ServiceP50: 1, ServiceP99: 1.5, SchedLagP99: 0.05,
			OpCompleted: map[string]int64{"create": 2}}, CPU: map[string]float64{"cgw": 10}},
	}
	r, err := Build(st, scenario.Default(), []string{"a:1"}, "h2c", map[string]float64{"cgw": 0.1}, audit.Result{OK: true}, series)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCSVUnitsAndPerOpColumns(t *testing.T) {
	var b bytes.Buffer
	if err := result(t).WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head, units := rows[0], rows[1]
	if len(units) != len(head) || units[0] != "s" || units[slices.Index(head, "p99_ms")] != "ms" {
		t.Errorf("units row %q does not match the header %q", units, head)
	}
	i := slices.Index(head, "create_completed")
	j := slices.Index(head, "balance_errors")
	if i < 0 || j < 0 || rows[2][i] != "1" || rows[3][i] != "2" || rows[2][j] != "1" {
		t.Errorf("per-op columns: header %q rows %q", head, rows[2:])
	}
}

func TestPageChartsAndVerdictFirst(t *testing.T) {
	r := result(t)
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"Throughput: offered and achieved", "Service time and scheduling lag", "Successful transactions per operation",
		"Errors per class", "CPU per component over time", "percentile spectrum", "99.999%", ">ramp-up<", "'Liberation Sans',Arial"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if v, p := strings.Index(page, "Verdict"), strings.Index(page, "provenance"); v < 0 || p < 0 || v > p {
		t.Errorf("the verdict (at %d) is not above the provenance (at %d)", v, p)
	}
	if strings.Contains(page, `class="fail">pass`) {
		t.Errorf("a passing figure is shown as failed")
	}
}

func TestIndexListsRuns(t *testing.T) {
	root := filepath.Join(t.TempDir(), "results")
	r := result(t)
	r.Label = "calico"
	if _, err := r.WriteAll(filepath.Join(root, "20261201-100000")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "20261201-100000", "junk.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := UpdateIndex(filepath.Join(root, "20261201-100000"))
	if err != nil || idx != filepath.Join(root, "index.html") {
		t.Fatalf("UpdateIndex: %q %v", idx, err)
	}
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"calico", `href="20261201-100000/report.html"`, `href="20261201-100000/series.csv"`, "2" /* offered */} {
		if !strings.Contains(string(b), want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if idx, err := UpdateIndex(t.TempDir()); err != nil || idx != "" {
		t.Errorf("a directory outside results/ got an index: %q %v", idx, err)
	}
}
