package report

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/operator"
)

// Notifications are the CHF-initiated notifications of a run (every
// phase) and, when the scenario triggered them, the operator calls.
type Notifications struct {
	// ByType is keyed by notificationType in lower case
	// (reauthorization, abort_charging; Gy RAR and ASR count as them).
	ByType map[string]NoticeType `json:"by_type"`
	// Refused counts notifications the loadgen had no room for (answered
	// 503 on Nchf).
	Refused int64 `json:"refused"`
	// Operator is set when the run called the operator API.
	Operator *OperatorCalls `json:"operator,omitempty"`
}

// NoticeType is the figures of one notification type.
type NoticeType struct {
	Received int64 `json:"received"`
	// Answered counts notifications whose update (re-authorisation) or
	// release (abort) got an answer, Failed those answered with an error.
	Answered int64 `json:"answered"`
	Failed   int64 `json:"failed"`
	// Stale counts notifications for a session that had ended; Merged
	// those for a session already answering one.
	Stale  int64 `json:"stale"`
	Merged int64 `json:"merged"`
	// LatencyMs is from the notification's arrival to the answer of the
	// update or release; LatencyHist the same, HdrHistogram V2
	// compressed base64, so that merge combines it exactly.
	LatencyMs   *Latency `json:"latency_ms,omitempty"`
	LatencyHist string   `json:"latency_hist,omitempty"`
}

// OperatorCalls are the operator API calls the run made for a share of
// its sessions (scenario notifications).
type OperatorCalls struct {
	// Triggered counts calls per type, Refused those the loadgen's queue
	// had no room for.
	Triggered map[string]int64 `json:"triggered"`
	Refused   int64            `json:"refused"`
	// OK and Failed count the answers (Statuses by HTTP status, "0" no
	// answer); Notified and NotifyFailed sum the notifications the CHF
	// said it sent.
	OK           int64            `json:"ok"`
	Failed       int64            `json:"failed"`
	Statuses     map[string]int64 `json:"statuses,omitempty"`
	Notified     int64            `json:"notified"`
	NotifyFailed int64            `json:"notify_failed"`
	// An abort bars the account; the loadgen unbars it at once:
	// Unbarred and UnbarFailed count those calls. Barred counts the
	// creates, events and updates refused (Nchf 403, Gy 4010) while a
	// bar of the run held (not errors).
	Unbarred    int64  `json:"unbarred"`
	UnbarFailed int64  `json:"unbar_failed"`
	Barred      int64  `json:"barred"`
	LastError   string `json:"last_error,omitempty"`
	// CallMs is the operator call's own latency (it returns once the
	// CHF's notifications are settled); ToNoticeMs from the call to the
	// notification's arrival for the session it was made for; RoundTripMs
	// from the call to the answer of that session's update or release.
	CallMs      *Latency `json:"call_ms,omitempty"`
	ToNoticeMs  *Latency `json:"to_notice_ms,omitempty"`
	RoundTripMs *Latency `json:"round_trip_ms,omitempty"`
	// The same three as histograms (as LatencyHist), for merge.
	CallHist      string `json:"call_hist,omitempty"`
	ToNoticeHist  string `json:"to_notice_hist,omitempty"`
	RoundTripHist string `json:"round_trip_hist,omitempty"`
}

func latencyOrNil(h *histogram.Histogram) *Latency {
	if h == nil || h.Count() == 0 {
		return nil
	}
	l := latencyOf(h.Summary())
	return &l
}

// histOrEmpty encodes h; "" when it is empty or cannot be encoded (merge
// then notes the latency it could not combine).
func histOrEmpty(h *histogram.Histogram) string {
	if h == nil || h.Count() == 0 {
		return ""
	}
	s, err := h.Encode()
	if err != nil {
		return ""
	}
	return s
}

// BuildNotifications summarises a run's notices and, when op is set, its
// operator calls; nil when the run had neither.
func BuildNotifications(n *engine.NoticeStats, op *operator.Stats) *Notifications {
	if !n.Any() && op == nil {
		return nil
	}
	out := &Notifications{ByType: map[string]NoticeType{}, Refused: n.Refused}
	for k, name := range engine.NoticeNames {
		out.ByType[name] = NoticeType{Received: n.Received[k], Answered: n.Answered[k], Failed: n.Failed[k],
			Stale: n.Stale[k], Merged: n.Merged[k], LatencyMs: latencyOrNil(n.Latency[k]), LatencyHist: histOrEmpty(n.Latency[k])}
	}
	if op != nil {
		oc := &OperatorCalls{Triggered: map[string]int64{}, Refused: n.TriggerRefused + op.Dropped,
			OK: op.OK, Failed: op.Failed, Notified: op.Notified, NotifyFailed: op.NotifyFailed, LastError: op.LastError,
			Unbarred: op.Unbarred, UnbarFailed: op.UnbarFailed, Barred: n.Barred,
			CallMs: latencyOrNil(op.Latency), ToNoticeMs: latencyOrNil(n.TriggerLatency), RoundTripMs: latencyOrNil(n.RoundTrip),
			CallHist: histOrEmpty(op.Latency), ToNoticeHist: histOrEmpty(n.TriggerLatency), RoundTripHist: histOrEmpty(n.RoundTrip)}
		for k, name := range engine.NoticeNames {
			oc.Triggered[name] = n.Triggered[k]
		}
		if len(op.Statuses) > 0 {
			oc.Statuses = map[string]int64{}
			for s, c := range op.Statuses {
				oc.Statuses[fmt.Sprint(s)] = c
			}
		}
		out.Operator = oc
	}
	return out
}

func ms(l *Latency) string {
	if l == nil {
		return "n/a"
	}
	return fmt.Sprintf("p50 %.2fms p99 %.2fms max %.2fms", l.P50, l.P99, l.Max)
}

// writeNotifications is the text block of the notifications, nothing
// without any.
func (r *Result) writeNotifications(w io.Writer) {
	n := r.Notifications
	if n == nil {
		return
	}
	fmt.Fprintf(w, "\nnotifications (whole run):")
	if n.Refused > 0 {
		fmt.Fprintf(w, " %d refused (no room)", n.Refused)
	}
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(n.ByType)) {
		t := n.ByType[k]
		fmt.Fprintf(w, "  %-16s received %d answered %d failed %d stale %d merged %d  notice→answer %s\n",
			k, t.Received, t.Answered, t.Failed, t.Stale, t.Merged, ms(t.LatencyMs))
	}
	if o := n.Operator; o != nil {
		fmt.Fprintf(w, "  operator calls   reauthorize %d abort %d refused %d ok %d failed %d (CHF notified %d, failed %d)\n",
			o.Triggered[engine.NoticeNames[engine.NoticeReauth]], o.Triggered[engine.NoticeNames[engine.NoticeAbort]], o.Refused, o.OK, o.Failed, o.Notified, o.NotifyFailed)
		if o.Unbarred+o.UnbarFailed+o.Barred > 0 {
			fmt.Fprintf(w, "    unbar ok %d failed %d; requests refused while barred %d (not errors)\n", o.Unbarred, o.UnbarFailed, o.Barred)
		}
		fmt.Fprintf(w, "    call %s\n    call→notice %s\n    call→answer %s\n", ms(o.CallMs), ms(o.ToNoticeMs), ms(o.RoundTripMs))
		if o.LastError != "" {
			fmt.Fprintf(w, "    last error: %s\n", o.LastError)
		}
	}
}

// writeNotificationsMarkdown is the Markdown table of the notifications.
func (r *Result) writeNotificationsMarkdown(w io.Writer) {
	n := r.Notifications
	if n == nil {
		return
	}
	fmt.Fprintf(w, "\n| notification | received | answered | failed | stale | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(n.ByType)) {
		t := n.ByType[k]
		p50, p99 := "n/a", "n/a"
		if t.LatencyMs != nil {
			p50, p99 = fmt.Sprintf("%.3f", t.LatencyMs.P50), fmt.Sprintf("%.3f", t.LatencyMs.P99)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s |\n", k, t.Received, t.Answered, t.Failed, t.Stale, p50, p99)
	}
	if o := n.Operator; o != nil {
		fmt.Fprintf(w, "\nOperator calls: %d ok, %d failed, %d refused; unbar %d ok, %d failed; %d requests refused while barred; call %s; call→notice %s; call→answer %s.\n",
			o.OK, o.Failed, o.Refused, o.Unbarred, o.UnbarFailed, o.Barred, ms(o.CallMs), ms(o.ToNoticeMs), ms(o.RoundTripMs))
	}
}
