package run

import (
	"errors"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/report"
)

func TestParseFault(t *testing.T) {
	f := func(in string, want Fault) {
		t.Helper()
		got, err := ParseFault(in)
		if err != nil || got != want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	f("kill:ocp:10s", Fault{Action: FaultKill, Service: "ocp", At: 10 * time.Second, For: DefaultFaultFor})
	f("stop:abm:1.5s:3s", Fault{Action: FaultStop, Service: "abm", At: 1500 * time.Millisecond, For: 3 * time.Second})
	for _, bad := range []string{"", "kill", "kill:ocp", "boom:ocp:1s", "kill:db:1s", "kill:ocp:x", "kill:ocp:-1s", "kill:ocp:1s:0s", "kill:ocp:1s:2s:3"} {
		if _, err := ParseFault(bad); !errors.Is(err, ErrFaultSpec) {
			t.Errorf("ParseFault(%q): err %v, want ErrFaultSpec", bad, err)
		}
	}
}

// TestFaultResults: errors are counted from the injection until the
// series is back to the offered TPS with a p99 under the bound for 3
// seconds; a run that never gets back is reported not recovered.
func TestFaultResults(t *testing.T) {
	start := time.Unix(1000, 0)
	measure := start.Add(2 * time.Second)
	pt := func(sec int, offered, completed, errs int64, p99 float64) report.Point {
		return report.Point{Tick: engine.Tick{Second: sec, Phase: "measure", Offered: offered, Completed: completed, Errors: errs, P99: p99}}
	}
	var pts []report.Point
	for s := 3; s <= 6; s++ {
		pts = append(pts, pt(s, 100, 100, 0, 10))
	}
	pts = append(pts, pt(7, 100, 40, 60, 900), pt(8, 100, 90, 10, 50), pt(9, 100, 100, 0, 11), pt(10, 100, 100, 0, 12), pt(11, 100, 100, 0, 9), pt(12, 100, 100, 0, 10))
	runs := []faultRun{{f: Fault{Action: FaultKill, Service: "ocp", At: 4 * time.Second, For: time.Second}, instance: "ocp-1",
		injected: measure.Add(4*time.Second + 200*time.Millisecond), restored: measure.Add(5*time.Second + 500*time.Millisecond)}}
	got := faultResults(runs, pts, start, measure)
	if len(got) != 1 {
		t.Fatalf("got %+v", got)
	}
	r := got[0]
	// injected at run second 6.2: seconds 7 and 8 are bad, 9..11 good.
	if r.Errors != 70 || r.RecoverS < 1.7 || r.RecoverS > 1.9 || r.BaselineP99Ms != 10 || r.PeakP99Ms != 900 || r.Instance != "ocp-1" {
		t.Errorf("result %+v", r)
	}
	// Never back: the last seconds stay slow.
	pts = append(pts[:7:7], pt(10, 100, 100, 0, 40), pt(11, 100, 100, 0, 40))
	if r := faultResults(runs, pts, start, measure)[0]; r.RecoverS != -1 {
		t.Errorf("not recovered: %+v", r)
	}
}
