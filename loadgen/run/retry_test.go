package run

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// faultyCore wraps the charging core. Every shedEvery-th charging request
// (0: none) is refused for overload before the core sees it (Nchf 503
// with Retry-After, Gy 3004); every doubtEvery-th is charged by the core
// and then fails (Nchf 500, Gy 3004): its answer is lost after the
// charge. One request (its identity) meets at most maxFaults of these
// (0: no bound), fewer than the load generator's retries: at the end of a
// run only a few requests remain and their retries alone advance the
// count, so without the bound the same request can be hit on every
// attempt. With refuseEvents every event is refused for overload.
type faultyCore struct {
	core                  chf.Charger
	shedEvery, doubtEvery int64
	maxFaults             int
	refuseEvents          bool
	n                     atomic.Int64
	shed, doubt           atomic.Int64
	mu                    sync.Mutex
	faults                map[faultKey]int
}

// faultKey is a charging request's identity, the same over its attempts.
type faultKey struct {
	op      chf.Op
	supi    string
	session string
	seq     uint32
	key     uint64
}

// fault reports whether req may be failed once more, and counts it.
func (c *faultyCore) fault(req *chf.ChargeRequest) bool {
	if c.maxFaults == 0 {
		return true
	}
	k := faultKey{req.Op, req.SUPI, req.Session, req.Seq, req.Key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults == nil {
		c.faults = map[faultKey]int{}
	}
	if c.faults[k] >= c.maxFaults {
		return false
	}
	c.faults[k]++
	return true
}

var errLostAnswer = errors.New("faulty core: the answer was lost after the charge")

func (c *faultyCore) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	if req.Op == chf.OpBalance {
		return c.core.Charge(ctx, req, resp)
	}
	k := c.n.Add(1)
	if c.refuseEvents && req.Op == chf.OpEvent || c.shedEvery > 0 && k%c.shedEvery == 0 && c.fault(req) {
		c.shed.Add(1)
		*resp = chf.ChargeResponse{Result: chf.ResultOverloaded}
		return nil
	}
	err := c.core.Charge(ctx, req, resp)
	if err == nil && c.doubtEvery > 0 && k%c.doubtEvery == 0 && c.fault(req) {
		c.doubt.Add(1)
		return errLostAnswer
	}
	return err
}

// Shed requests (Nchf 503 after its Retry-After, Gy 3004) and answers
// lost after the charge are retried with the request's identity through
// the real charging core: the core charges each once, the ledger and the
// independent expectation count it once, nothing is lost, and the full
// audit passes.
func TestRetriesKeepMoneyExact(t *testing.T) {
	for _, proto := range []string{"h2c", "gy"} {
		t.Run(proto, func(t *testing.T) {
			var fc *faultyCore
			httpAddr, gyAddr := inProcessCHFWith(t, 200, 1_000_000, func(core chf.Charger) chf.Charger {
				fc = &faultyCore{core: core, shedEvery: 7, doubtEvery: 11, maxFaults: 3}
				return fc
			})
			o := options(httpAddr)
			if proto == "gy" {
				o = options(gyAddr)
				o.Proto, o.BalanceTargets = "gy", []string{httpAddr}
			}
			o.Audit, o.CPU = AuditFull, nil
			// a long timeout: the drain bound leaves a session that
			// several sheds pushed back (a second each) room to end
			o.Scenario.Timeout = scenario.Duration(5 * time.Second)
			res, err := execute(t, o)
			if res != nil {
				t.Logf("retried %d, resolved by a retry %d, dropped %d, lost %+v", res.Retried, res.RetryResolved, res.RetriesDropped, res.UsageLost)
			}
			if err != nil {
				t.Fatal(err)
			}
			a := res.Audit
			if !a.OK || !a.Independent || a.Charged == 0 || a.ExpectedMismatches != 0 || a.Unresolved != 0 || a.UsageLost != 0 {
				t.Fatalf("audit %+v", a)
			}
			shed, doubt := fc.shed.Load(), fc.doubt.Load()
			if shed == 0 || doubt == 0 || res.Retried < shed+doubt || res.RetryResolved == 0 || res.RetriesDropped != 0 {
				t.Fatalf("injected %d sheds and %d lost answers; retried %d, resolved by a retry %d, dropped %d", shed, doubt, res.Retried, res.RetryResolved, res.RetriesDropped)
			}
			if res.UsageLost.Requests != 0 {
				t.Fatalf("usage lost %+v", res.UsageLost)
			}
		})
	}
}

// Usage that no attempt could deliver (every event refused for overload,
// its retry too) is counted lost and fails the audit, although every
// balance reconciles: over Nchf the refusals are definitive (refused),
// over Gy 3004 leaves them in doubt.
func TestUsageLostFailsTheAudit(t *testing.T) {
	for _, c := range []struct {
		proto   string
		inDoubt bool
	}{{"h2c", false}, {"gy", true}} {
		t.Run(c.proto, func(t *testing.T) {
			httpAddr, gyAddr := inProcessCHFWith(t, 200, 1_000_000, func(core chf.Charger) chf.Charger {
				return &faultyCore{core: core, refuseEvents: true}
			})
			o := options(httpAddr)
			if c.proto == "gy" {
				o = options(gyAddr)
				o.Proto, o.BalanceTargets = "gy", []string{httpAddr}
			}
			o.Audit, o.CPU = AuditFull, nil
			o.Scenario.RetryErrors = 1
			res, err := execute(t, o)
			if !errors.Is(err, ErrAudit) || res == nil {
				t.Fatalf("err %v: want the audit failed", err)
			}
			a, l := res.Audit, res.UsageLost
			events := res.Ops["event"].Count
			if a.OK || a.Mismatches != 0 || a.ExpectedMismatches != 0 || a.UsageLost != l.Requests || !strings.Contains(a.Reason, "usage lost") {
				t.Fatalf("audit %+v: want it failed on the lost usage alone", a)
			}
			if events == 0 || l.Requests < events || l.ServiceSpecificUnits != uint64(l.Requests) || !l.Rated || l.ExpectedMinorUnits == 0 ||
				c.inDoubt && l.InDoubt != l.Requests || !c.inDoubt && l.Refused != l.Requests {
				t.Fatalf("%d events measured; usage lost %+v", events, l)
			}
			if res.Retried < l.Requests {
				t.Fatalf("retried %d: want each lost event retried once", res.Retried)
			}
		})
	}
}
