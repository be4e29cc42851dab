package compare

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/report"
)

func result(label string, tps, p99, jitter, us float64, cpu map[string]float64) *report.Result {
	return &report.Result{SchemaVersion: report.SchemaVersion, Label: label, TPS: tps, JitterCV: jitter,
		LatencyMs: report.Latency{P50: p99 / 4, P99: p99, P999: p99 * 2}, SUTCPUUsTxn: us, CPUPercent: cpu}
}

func TestRatios(t *testing.T) {
	dir := t.TempDir()
	a := result("calico", 50000, 4, 0.5, 200, map[string]float64{"cgw": 40, "loadgen": 30})
	b := result("sriov", 70000, 2, 0.25, 150, map[string]float64{"cgw": 45, "loadgen": 35})
	var runs []Run
	for _, r := range []*report.Result{a, b} {
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
	tab, err := New(runs, 0)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	tab.WriteMarkdown(&md)
	for _, want := range []string{
		"| calico | 50000 | 1.00 | 1.000 | 4.000 | 1.00 | 8.000 | 0.500 | 1.00 | 40.0 | 30.0 | 200.0 | 1.00 |",
		"| sriov | 70000 | 1.40 | 0.500 | 2.000 | 0.50 | 4.000 | 0.250 | 0.50 | 45.0 | 35.0 | 150.0 | 0.75 |",
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
