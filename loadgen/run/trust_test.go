package run

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// A CPU source that is missing at the start is an error before the run,
// or with CPUOptional a result marked incomplete; one that disappears
// during the run is an error returned with the result, never a smaller
// sum passed off as whole.
func TestCPUSourceStrict(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()

	o := options(fake.Addr())
	o.CPU = append(o.CPU, cpu.NewProc("ghost", 1<<30))
	if res, err := execute(t, o); res != nil || !errors.Is(err, ErrCPU) || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("missing at the start: result %v, err %v; want ErrCPU naming ghost", res != nil, err)
	}
	o.CPUOptional = true
	res, err := execute(t, o)
	if err != nil || len(res.Incomplete) == 0 || !strings.Contains(res.Incomplete[0], "ghost") {
		t.Fatalf("missing at the start, optional: %v, incomplete %q", err, res.Incomplete)
	}

	// A process that dies during the measured window: killed (and reaped)
	// on the first progress line of the measure phase, so inside the
	// window however late the run starts (a process timed to die by
	// itself outlived a run CI had delayed).
	lost := func(optional bool) (*report.Result, error) {
		t.Helper()
		p := exec.Command("sleep", "60")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		kill := func() {
			once.Do(func() {
				p.Process.Kill()
				p.Wait()
			})
		}
		defer kill()
		o := options(fake.Addr())
		o.Scenario.Phases.Duration = scenario.Duration(2500 * time.Millisecond)
		o.ProgressOut = writerFunc(func(b []byte) (int, error) {
			if bytes.Contains(b, []byte(`"phase":"measure"`)) {
				kill()
			}
			return len(b), nil
		})
		o.CPUOptional = optional
		o.CPU = append(o.CPU, cpu.NewProc("dying", p.Process.Pid))
		return execute(t, o)
	}
	if res, err := lost(false); res == nil || !errors.Is(err, ErrCPU) || len(res.Incomplete) == 0 {
		t.Fatalf("lost during the run: result %v, err %v", res != nil, err)
	}
	if res, err := lost(true); err != nil || len(res.Incomplete) == 0 || !strings.Contains(res.Incomplete[0], "dying") {
		t.Fatalf("lost during the run, optional: err %v, incomplete %v", err, res)
	}
}

// Thresholds are checked and reported; a failed one returns
// ErrThresholds with the result; the default ones fail a run where every
// request fails.
func TestThresholdsAndInterrupt(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	o := options(fake.Addr())
	o.Scenario.Thresholds = []string{"p99<1ns"}
	o.Thresholds = o.Scenario.EffectiveThresholds(false)
	res, err := execute(t, o)
	if !errors.Is(err, ErrThresholds) || res == nil || res.ThresholdsOK || len(res.Thresholds) != 3 || res.Thresholds[2].Pass {
		t.Fatalf("p99<1ns: err %v, verdicts %+v", err, res)
	}

	closed := options("127.0.0.1:1")
	closed.Audit = AuditOff
	def := scenario.Default()
	closed.Thresholds = def.EffectiveThresholds(false)
	res, err = execute(t, closed)
	if !errors.Is(err, ErrThresholds) || res == nil || res.Errors == 0 {
		t.Fatalf("every request failing: err %v", err)
	}

	// Cancelled: the result is marked interrupted and the audit skipped.
	o = options(fake.Addr())
	o.Scenario.Phases.Duration = scenario.Duration(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	t0 := time.Now()
	res, err = Execute(ctx, o)
	if err != nil || !res.Interrupted || !res.Audit.Skipped || time.Since(t0) > 10*time.Second {
		t.Fatalf("cancelled: err %v, interrupted %v, audit %+v, took %s", err, res != nil && res.Interrupted, res.Audit, time.Since(t0))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
