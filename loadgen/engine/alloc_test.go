package engine

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// nopDriver is a Driver that is never called.
type nopDriver struct{}

func (nopDriver) Do(context.Context, *driver.Request, *driver.Response) error { return nil }
func (nopDriver) Targets() int                                                { return 1 }
func (nopDriver) Close()                                                      {}

// Building a request and classifying its answer allocate nothing once the
// flow's buffers have grown: the per-request path of the scheduler.
func TestRequestPathAllocs(t *testing.T) {
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	cfg := Config{Scenario: sc, Driver: nopDriver{}, NFName: "nf"}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	start := time.Now()
	agg := newAggregator(nil, start, 0, 0, time.Second)
	w := newWorker(0, 1, &cfg, first, start, newSchedule(100, 0), agg, 0, time.Second)
	f := w.getFlow()
	f.supi = first.Append(f.supi[:0], 5)
	f.ref = append(f.ref[:0], "imsi-001010000000006.0123456789abcdef"...)
	location := []byte("http://cgw/nchf-convergedcharging/v3/chargingdata/imsi-001010000000006.0123456789abcdef")
	body := []byte(`{"multipleUnitInformation":[{"resultCode":"SUCCESS","ratingGroup":10}]}`)
	for _, c := range []struct {
		kind   scenario.Kind
		op     Op
		status int
	}{
		{scenario.KindData, OpCreate, 201}, {scenario.KindData, OpUpdate, 200}, {scenario.KindVoice, OpRelease, 204},
		{scenario.KindSMS, OpEvent, 201}, {scenario.KindBalance, OpBalance, 200},
	} {
		f.kind, f.op, f.step = c.kind, c.op, 1
		one := func() {
			w.build(f)
			f.resp.Status = c.status
			f.resp.Location = append(f.resp.Location[:0], location...)
			f.resp.Body = append(f.resp.Body[:0], body...)
			w.finish(f, nil)
			if f.class != "" {
				t.Fatalf("%s: class %q", c.op, f.class)
			}
			w.ops[c.op].Latency.Record(time.Millisecond)
		}
		one()
		if n := testing.AllocsPerRun(200, one); n > 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", c.op, n)
		}
	}
}
