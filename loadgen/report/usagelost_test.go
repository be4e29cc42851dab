package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// usage_lost is in result.json, in every report (summary, Markdown, HTML)
// whether zero or not, and a merge of shards adds it up; a run whose audit
// was skipped warns of it.
func TestUsageLostReported(t *testing.T) {
	sc := scenario.Default()
	lost := engine.UsageLost{Requests: 3, Refused: 1, InDoubt: 1, Abandoned: 1, TotalVolume: 5 << 20, Time: 30, ServiceSpecificUnits: 1, ExpectedMinorUnits: 41, Rated: true}
	mk := func(shard int, l engine.UsageLost, a audit.Result) *Result {
		t.Helper()
		st := statsOf([]sample{{op: engine.OpEvent, lat: time.Millisecond, svc: time.Millisecond}}, 10*time.Second)
		st.UsageLost, st.Retried, st.RetriesDropped = l, 4, 2
		r, err := Build(st, sc, []string{"a:1"}, "h2c", nil, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Shard = fmt.Sprintf("%d/2", shard)
		return r
	}
	failed := audit.Result{Checked: 1, UsageLost: lost.Requests, Reason: audit.LostReason(lost)}
	r := mk(0, lost, failed)
	var js map[string]any
	b, _ := json.Marshal(r)
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if ul, ok := js["usage_lost"].(map[string]any); !ok || ul["requests"] != 3.0 || ul["expected_minor_units"] != 41.0 || js["retries_dropped"] != 2.0 {
		t.Fatalf("result.json usage_lost %v, retries_dropped %v", js["usage_lost"], js["retries_dropped"])
	}
	check := func(what string, write func(*strings.Builder), want ...string) {
		t.Helper()
		var s strings.Builder
		write(&s)
		for _, w := range want {
			if !strings.Contains(s.String(), w) {
				t.Errorf("%s lacks %q:\n%s", what, w, s.String())
			}
		}
	}
	check("summary", func(s *strings.Builder) { r.WriteSummary(s) }, "audit FAIL", "usage lost: 3 requests FAIL (1 refused on every attempt, 1 in doubt, 1 abandoned at the end)", "rated 41 minor units", "retries dropped (queue full or past the drain bound) 2")
	check("markdown", func(s *strings.Builder) { r.WriteMarkdown(s) }, "| usage lost (not delivered after the retries) | **3 requests FAIL", "FAIL: audit")
	check("html", func(s *strings.Builder) {
		if err := r.WriteHTML(s); err != nil {
			t.Fatal(err)
		}
	}, "usage lost (not delivered after the retries)", "3 requests FAIL")
	clean := mk(1, engine.UsageLost{}, audit.Result{OK: true, Checked: 1})
	check("summary of a clean run", func(s *strings.Builder) { clean.WriteSummary(s) }, "usage lost: 0 (every unit reported was delivered)")
	check("markdown of a clean run", func(s *strings.Builder) { clean.WriteMarkdown(s) }, "| usage lost (not delivered after the retries) | 0 |")

	m, err := Merge(MergeOptions{}, r, clean)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsageLost != lost || m.Audit.UsageLost != 3 || m.Audit.OK || m.RetriesDropped != 4 {
		t.Fatalf("merged usage lost %+v, audit %+v, retries dropped %d", m.UsageLost, m.Audit, m.RetriesDropped)
	}
	check("merged summary", func(s *strings.Builder) { m.WriteSummary(s) }, "usage lost: 3 requests FAIL")

	skipped := mk(0, lost, audit.Result{Skipped: true, Reason: "disabled"})
	if len(skipped.Warnings) != 1 || !strings.Contains(skipped.Warnings[0], "usage lost: 3 requests") {
		t.Fatalf("skipped audit: warnings %q", skipped.Warnings)
	}
}
