package report

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/operator"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func newNotices() *engine.NoticeStats {
	return &engine.NoticeStats{Latency: [2]*histogram.Histogram{histogram.New(), histogram.New()},
		TriggerLatency: histogram.New(), RoundTrip: histogram.New()}
}

func newOperatorStats() *operator.Stats {
	return &operator.Stats{Statuses: map[int]int64{}, Latency: histogram.New()}
}

// TestMergeNotifications: merge sums the notification counts of the
// shards and merges their latency histograms exactly: the merged
// notifications are those of the union of the samples.
func TestMergeNotifications(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shardN := make([]*engine.NoticeStats, 3)
	shardO := make([]*operator.Stats, 3)
	allN, allO := newNotices(), newOperatorStats()
	for i := range shardN {
		shardN[i], shardO[i] = newNotices(), newOperatorStats()
	}
	d := func() time.Duration { return time.Duration(rng.ExpFloat64() * 3e6) }
	for i := 0; i < 6000; i++ {
		ns, os := shardN[i%3], shardO[i%3]
		k := rng.IntN(2)
		lat, tl, rt, cl := d(), d(), d(), d()
		for _, n := range []*engine.NoticeStats{ns, allN} {
			n.Received[k]++
			n.Answered[k]++
			n.Triggered[k]++
			if i%50 == 0 {
				n.Stale[k]++
				n.Merged[k]++
				n.Failed[k]++
				n.Refused++
				n.TriggerRefused++
				n.Barred++
			}
			n.Latency[k].Record(lat)
			n.TriggerLatency.Record(tl)
			n.RoundTrip.Record(rt)
		}
		for _, o := range []*operator.Stats{os, allO} {
			o.Calls++
			o.OK++
			o.Statuses[200]++
			o.Notified++
			if k == 1 {
				o.Unbarred++
			}
			if i%70 == 0 {
				o.Failed++
				o.Statuses[0]++
				o.NotifyFailed++
				o.UnbarFailed++
			}
			o.Latency.Record(cl)
		}
	}
	sc := scenario.Default()
	mk := func(n *engine.NoticeStats, o *operator.Stats) *Result {
		r, err := Build(statsOf([]sample{{op: engine.OpCreate, lat: time.Millisecond, svc: time.Millisecond}}, 10*time.Second),
			sc, []string{"a:1"}, "h2c", nil, audit.Result{OK: true, Checked: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Notifications = BuildNotifications(n, o)
		return r
	}
	var parts []*Result
	for i := range shardN {
		r := mk(shardN[i], shardO[i])
		r.Shard = fmt.Sprintf("%d/3", i)
		parts = append(parts, r)
	}
	merged, err := Merge(MergeOptions{}, parts...)
	if err != nil {
		t.Fatal(err)
	}
	union := mk(allN, allO).Notifications
	got := merged.Notifications
	if got == nil || got.Operator == nil || got.ByType["abort_charging"].Received == 0 || got.Operator.RoundTripMs == nil || got.Operator.Barred == 0 {
		t.Fatalf("merged notifications %+v", got)
	}
	// The histograms' encodings may differ; their contents may not.
	sameHist := func(name, a, b string) {
		t.Helper()
		ha, err1 := histogram.Decode(a)
		hb, err2 := histogram.Decode(b)
		if err1 != nil || err2 != nil || ha.Count() != hb.Count() || ha.Summary() != hb.Summary() {
			t.Fatalf("%s histogram: %v %v", name, err1, err2)
		}
	}
	for k, u := range union.ByType {
		g := got.ByType[k]
		sameHist(k, g.LatencyHist, u.LatencyHist)
		g.LatencyHist, u.LatencyHist = "", ""
		if !reflect.DeepEqual(g, u) {
			t.Fatalf("%s: merged %+v, union %+v", k, g, u)
		}
	}
	g, u := *got.Operator, *union.Operator
	sameHist("call", g.CallHist, u.CallHist)
	sameHist("to_notice", g.ToNoticeHist, u.ToNoticeHist)
	sameHist("round_trip", g.RoundTripHist, u.RoundTripHist)
	g.CallHist, g.ToNoticeHist, g.RoundTripHist = "", "", ""
	u.CallHist, u.ToNoticeHist, u.RoundTripHist = "", "", ""
	if !reflect.DeepEqual(g, u) || got.Refused != union.Refused {
		t.Fatalf("operator: merged %+v, union %+v", g, u)
	}

	// A shard without histograms (an older result) is noted, its
	// latency left out; the counts still add up.
	parts[2].Notifications.ByType["reauthorization"] = NoticeType{Received: 1, LatencyMs: &Latency{P50: 1}}
	merged, err = Merge(MergeOptions{}, parts...)
	if err != nil {
		t.Fatal(err)
	}
	noted := false
	for _, x := range merged.Incomplete {
		noted = noted || x == "notifications: the type reauthorization latency of some shard has no histogram (an older result): the merged latency leaves it out"
	}
	if !noted || merged.Notifications.ByType["reauthorization"].Received != parts[0].Notifications.ByType["reauthorization"].Received+parts[1].Notifications.ByType["reauthorization"].Received+1 {
		t.Fatalf("incomplete %v, %+v", merged.Incomplete, merged.Notifications.ByType["reauthorization"])
	}
	// No shard with notifications: none merged.
	for _, p := range parts {
		p.Notifications = nil
	}
	if merged, err = Merge(MergeOptions{}, parts...); err != nil || merged.Notifications != nil {
		t.Fatalf("%v %+v", err, merged.Notifications)
	}
}
