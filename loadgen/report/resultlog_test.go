package report

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// logResult builds a result with histograms and a series, as a run would.
func logResult(t *testing.T) *Result {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	ss := make([]sample, 2000)
	for i := range ss {
		ss[i] = sample{op: engine.Op(rng.IntN(int(engine.NumOps))), lat: time.Duration(rng.ExpFloat64() * 2e6)}
		ss[i].svc = ss[i].lat / 2
	}
	r, err := Build(statsOf(ss, 5*time.Second), scenario.Default(), []string{"http://10.0.0.21:8080"}, "h2c",
		map[string]float64{"loadgen": 1.5}, audit.Result{OK: true, Checked: 10}, []Point{{Tick: engine.Tick{Second: 1, Phase: "measure", Offered: 400, Completed: 400}}, {Tick: engine.Tick{Second: 2, Phase: "measure", Offered: 401, Completed: 401}}})
	if err != nil {
		t.Fatal(err)
	}
	r.Shard = "1/2"
	return r
}

func TestResultLogRoundTrip(t *testing.T) {
	want := logResult(t)
	var line bytes.Buffer
	if err := WriteResultLog(&line, want); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line.String(), ResultLogMarker) || strings.Count(line.String(), "\n") != 1 || !strings.HasSuffix(line.String(), "\n") {
		t.Fatalf("not one marked line: %.200q", line.String())
	}
	// A pod's log: progress and the summary around it, an earlier result
	// line (the last one wins), timestamps as `kubectl logs --timestamps`
	// puts them.
	earlier := *want
	earlier.Label = "earlier"
	var first bytes.Buffer
	if err := WriteResultLog(&first, &earlier); err != nil {
		t.Fatal(err)
	}
	log := "starting\n" + first.String() + "t=1s offered 400 tps\n" +
		"2026-12-06T10:00:00.000000001Z " + line.String() + "done\n"
	got, err := ParseResultLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	// Compare through the file format: ReadJSON's result of the same bytes.
	path := t.TempDir() + "/r.json"
	if err := want.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, fromFile) {
		t.Errorf("result from the log differs from the same result read from its file:\nlog  %+v\nfile %+v", got, fromFile)
	}
	if got.Shard != "1/2" || got.Label != "" {
		t.Errorf("parsed the wrong line: shard %q label %q", got.Shard, got.Label)
	}
}

func TestParseResultLogErrors(t *testing.T) {
	f := func(log string, want error, wantText string) {
		t.Helper()
		_, err := ParseResultLog(strings.NewReader(log))
		if err == nil {
			t.Fatalf("ParseResultLog(%.80q) accepted it", log)
		}
		if want != nil && !errors.Is(err, want) {
			t.Errorf("ParseResultLog(%.80q) = %v, want %v", log, err, want)
		}
		if !strings.Contains(err.Error(), wantText) {
			t.Errorf("ParseResultLog(%.80q) = %v, want it to say %q", log, err, wantText)
		}
	}
	f("", ErrNoResultLog, "no LOADGEN-RESULT")
	f("progress\nsummary\n", ErrNoResultLog, "no LOADGEN-RESULT")
	f("a\n"+ResultLogMarker+`{"schema_version":1`+"\n", nil, "log line 2")
	f(ResultLogMarker+`{"schema_version":1} x`+"\n", nil, "trailing data")
	f(ResultLogMarker+`{"schema_version":99}`+"\n", ErrSchema, "log line 1")
}
