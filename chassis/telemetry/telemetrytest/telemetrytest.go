// Package telemetrytest helps tests read what a service exports on
// /metrics: scrape it, read one sample, list the metric families, and lint
// the exposition with promtool (`promtool check metrics`, installed pinned
// by `make tools`).
package telemetrytest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// Scrape GETs url (a /metrics endpoint) and returns the body.
func Scrape(t testing.TB, url string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("cannot scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cannot scrape %s: status %d, %v", url, resp.StatusCode, err)
	}
	return b
}

// Families parses a text exposition.
func Families(t testing.TB, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("cannot parse exposition: %v\n%s", err, text)
	}
	return fams
}

// Value returns the value of the sample of family name whose labels
// include labels (a counter's or gauge's value, a histogram's count), or
// 0 when there is none.
func Value(t testing.TB, text []byte, name string, labels map[string]string) float64 {
	t.Helper()
	f := Families(t, text)[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.Label {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// ForbiddenLabels are the label names a service must not export: the
// Prometheus server sets them on every target.
var ForbiddenLabels = []string{"service", "job", "instance", "namespace", "pod"}

// CheckLabels fails t when a sample carries one of ForbiddenLabels.
func CheckLabels(t testing.TB, text []byte) {
	t.Helper()
	for name, f := range Families(t, text) {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				for _, bad := range ForbiddenLabels {
					if lp.GetName() == bad {
						t.Errorf("%s has a label named %q, which the Prometheus target labels override", name, bad)
					}
				}
			}
		}
	}
}

// Promtool runs `promtool check metrics` on text and fails t on any
// finding. Without promtool (make tools installs it into .tools/bin) the
// test is skipped, or fails when CI=true.
func Promtool(t testing.TB, text []byte) {
	t.Helper()
	bin := findPromtool()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (make tools installs it)")
		}
		t.Skip("promtool not installed (make tools installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// findPromtool looks in PATH, then in .tools/bin of the enclosing module.
func findPromtool() string {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".tools", "bin", "promtool")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			return ""
		}
		dir = parent
	}
}

// Gather returns the exposition of telemetry.Registry (what /metrics
// serves) in the text format.
func Gather(t testing.TB) []byte {
	t.Helper()
	mfs, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatalf("cannot gather metrics: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("cannot encode %s: %v", mf.GetName(), err)
		}
	}
	return buf.Bytes()
}
