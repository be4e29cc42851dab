package report

import (
	"fmt"
	"slices"

	"github.com/chf-testbed/testbed/loadgen/histogram"
)

// latencyAcc merges a latency's histograms across shards; partial is
// set when a shard had the latency without its histogram (an older
// result), so the merged figure leaves it out.
type latencyAcc struct {
	h       *histogram.Histogram
	partial bool
}

func (a *latencyAcc) add(l *Latency, enc string) error {
	if enc == "" {
		a.partial = a.partial || l != nil
		return nil
	}
	h, err := histogram.Decode(enc)
	if err != nil {
		return err
	}
	if a.h == nil {
		a.h = histogram.New()
	}
	a.h.Merge(h)
	return nil
}

func (a *latencyAcc) result() (*Latency, string) { return latencyOrNil(a.h), histOrEmpty(a.h) }

// mergeNotifications combines the shards' notifications: counts add up,
// latencies merge from their histograms exactly. It returns notes for
// latencies a shard gave without a histogram (left out). nil when no
// shard had notifications.
func mergeNotifications(in []*Result) (*Notifications, []string, error) {
	var out *Notifications
	lat := map[string]*latencyAcc{}
	acc := func(k string) *latencyAcc {
		if lat[k] == nil {
			lat[k] = &latencyAcc{}
		}
		return lat[k]
	}
	for _, r := range in {
		n := r.Notifications
		if n == nil {
			continue
		}
		if out == nil {
			out = &Notifications{ByType: map[string]NoticeType{}}
		}
		out.Refused += n.Refused
		for k, t := range n.ByType {
			m := out.ByType[k]
			m.Received += t.Received
			m.Answered += t.Answered
			m.Failed += t.Failed
			m.Stale += t.Stale
			m.Merged += t.Merged
			out.ByType[k] = m
			if err := acc("type "+k).add(t.LatencyMs, t.LatencyHist); err != nil {
				return nil, nil, fmt.Errorf("cannot decode the %s notification latency of shard %s: %w", k, r.Shard, err)
			}
		}
		if o := n.Operator; o != nil {
			if out.Operator == nil {
				out.Operator = &OperatorCalls{Triggered: map[string]int64{}}
			}
			m := out.Operator
			for k, v := range o.Triggered {
				m.Triggered[k] += v
			}
			m.Refused += o.Refused
			m.OK += o.OK
			m.Failed += o.Failed
			if len(o.Statuses) > 0 && m.Statuses == nil {
				m.Statuses = map[string]int64{}
			}
			for k, v := range o.Statuses {
				m.Statuses[k] += v
			}
			m.Notified += o.Notified
			m.NotifyFailed += o.NotifyFailed
			m.Unbarred += o.Unbarred
			m.UnbarFailed += o.UnbarFailed
			m.Barred += o.Barred
			if o.LastError != "" {
				m.LastError = "shard " + r.Shard + ": " + o.LastError
			}
			for _, x := range []struct {
				name string
				l    *Latency
				enc  string
			}{{"call", o.CallMs, o.CallHist}, {"to_notice", o.ToNoticeMs, o.ToNoticeHist}, {"round_trip", o.RoundTripMs, o.RoundTripHist}} {
				if err := acc("operator "+x.name).add(x.l, x.enc); err != nil {
					return nil, nil, fmt.Errorf("cannot decode the operator %s latency of shard %s: %w", x.name, r.Shard, err)
				}
			}
		}
	}
	if out == nil {
		return nil, nil, nil
	}
	var notes []string
	for k, t := range out.ByType {
		t.LatencyMs, t.LatencyHist = acc("type " + k).result()
		out.ByType[k] = t
	}
	if m := out.Operator; m != nil {
		m.CallMs, m.CallHist = acc("operator call").result()
		m.ToNoticeMs, m.ToNoticeHist = acc("operator to_notice").result()
		m.RoundTripMs, m.RoundTripHist = acc("operator round_trip").result()
	}
	for k, a := range lat {
		if a.partial {
			notes = append(notes, "notifications: the "+k+" latency of some shard has no histogram (an older result): the merged latency leaves it out")
		}
	}
	slices.Sort(notes)
	return out, notes, nil
}
