package lab

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// ShapingRow is one configuration of the shaping experiment.
type ShapingRow struct {
	// Queue is "none" (no shaper), "shaping" (tbf with a queue of one
	// bandwidth-delay product) or "policing" (tbf whose queue holds one
	// burst: what does not fit is dropped, as a policer would).
	Queue string `json:"queue"`
	CC    string `json:"congestion_control"`
	// CHFCC is the congestion control of the CHF's own sockets.
	CHFCC      string `json:"chf_congestion_control"`
	LimitBytes int    `json:"tbf_limit_bytes,omitempty"`
	BurstBytes int    `json:"tbf_burst_bytes,omitempty"`
	// IPerf3 alone through the bottleneck (one stream, client → cgw).
	IPerf3Gbps  Stat `json:"iperf3_gbps"`
	Retransmits Stat `json:"iperf3_retransmits"`
	// The CHF at the fixed rate while an iperf3 bulk flow shares the
	// bottleneck.
	P50Ms    Stat     `json:"chf_p50_ms"`
	P99Ms    Stat     `json:"chf_p99_ms"`
	Errors   Stat     `json:"chf_errors"`
	Failures []string `json:"failures,omitempty"`
	trials   []shapingTrial
}

type shapingTrial struct{ gbps, retr, p50, p99, errs float64 }

// shaping runs the bottleneck experiment on the baremetal model: a tbf on
// both node uplinks, shaping vs policing-like queues, cubic vs bbr.
func (l *Lab) shaping(ctx context.Context, rep *Report) error {
	if l.o.Rate == 0 {
		l.o.Rate = 1000
	}
	rep.RateTPS = l.o.Rate
	rate := l.o.ShapingRateMbit
	bdp := int(float64(rate) * 1e6 / 8 * l.o.ShapingRTT.Seconds())
	burst := max(rate*1e6/8/1000, 3*l.o.MTU) // a millisecond of the rate, at least 3 packets
	bdp = max(bdp, burst)
	rep.Shaper = fmt.Sprintf("Bottleneck: tbf at %d Mbit/s on the fabric bridge's port towards each node (a switch queue; baremetal model, client on n2 → cgw on n1). "+
		"Shaping: queue of one bandwidth-delay product (%d bytes = %d Mbit/s × %v reference RTT; the lab's own RTT is tens of µs, whose BDP would be under one packet). "+
		"Policing-like: the queue holds one burst (%d bytes), the excess is dropped (this kernel has no police action). "+
		"iperf3: one TCP stream alone for %v. CHF: %.0f TPS with an iperf3 bulk flow sharing the bottleneck. Pinning: %s.",
		rate, bdp, rate, l.o.ShapingRTT, burst, l.o.IPerfTime, l.o.Rate, pinName(l.o.Pin[0]))
	rows := []*ShapingRow{
		{Queue: "none", CC: "cubic"},
		{Queue: "shaping", CC: "cubic", LimitBytes: bdp, BurstBytes: burst},
		{Queue: "shaping", CC: "bbr", LimitBytes: bdp, BurstBytes: burst},
		{Queue: "policing", CC: "cubic", LimitBytes: burst, BurstBytes: burst},
		{Queue: "policing", CC: "bbr", LimitBytes: burst, BurstBytes: burst},
	}
	for trial := 1; trial <= l.o.Trials; trial++ {
		for _, row := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			l.progress("shaping trial %d/%d: %s, %s", trial, l.o.Trials, row.Queue, row.CC)
			st, err := l.shapingRun(ctx, row, trial)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row.Failures = append(row.Failures, fmt.Sprintf("trial %d: %v", trial, err))
				l.progress("shaping trial %d: %s, %s failed: %v", trial, row.Queue, row.CC, err)
				continue
			}
			row.trials = append(row.trials, st)
			l.progress("shaping trial %d: %s, %s: iperf3 %.3f Gbit/s, %.0f retransmits; CHF p99 %.3f ms", trial, row.Queue, row.CC, st.gbps, st.retr, st.p99)
		}
	}
	for _, row := range rows {
		stat := func(f func(shapingTrial) float64) Stat {
			if len(row.trials) == 0 {
				return Stat{}
			}
			xs := make([]float64, len(row.trials))
			for i, t := range row.trials {
				xs[i] = f(t)
			}
			return Stat{Median: report.Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
		}
		row.IPerf3Gbps = stat(func(t shapingTrial) float64 { return t.gbps })
		row.Retransmits = stat(func(t shapingTrial) float64 { return t.retr })
		row.P50Ms = stat(func(t shapingTrial) float64 { return t.p50 })
		row.P99Ms = stat(func(t shapingTrial) float64 { return t.p99 })
		row.Errors = stat(func(t shapingTrial) float64 { return t.errs })
		rep.Shaping = append(rep.Shaping, *row)
	}
	return nil
}

func (l *Lab) shapingRun(ctx context.Context, row *ShapingRow, trial int) (shapingTrial, error) {
	var st shapingTrial
	t, down, err := l.build(ctx, "baremetal")
	if err != nil {
		return st, err
	}
	defer down()
	for i, n := range t.Nodes {
		// The namespace default carries the CHF's own sockets; a kernel
		// may refuse algorithms outside tcp_allowed_congestion_control in
		// a namespace (iperf3's -C still sets them per socket as root).
		if err := run(ctx, "ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.tcp_congestion_control="+row.CC); err != nil {
			row.CHFCC = "namespace default " + nsDefaultCC(ctx, n) + " (this kernel does not let a namespace select " + row.CC + ")"
		} else if row.CHFCC == "" {
			row.CHFCC = row.CC
		}
		if row.Queue == "none" {
			continue
		}
		// On the fabric's port towards the node: the queue sits in the
		// "switch", where a sender sees only drops and delay (on the
		// sender's own uplink TCP would feel it as local backpressure).
		if err := run(ctx, "ip", "netns", "exec", t.Fabric, "tc", "qdisc", "add", "dev", t.Legs[i], "root", "tbf",
			"rate", strconv.Itoa(l.o.ShapingRateMbit)+"mbit", "burst", strconv.Itoa(row.BurstBytes), "limit", strconv.Itoa(row.LimitBytes)); err != nil {
			return st, err
		}
	}
	pinned := l.o.Pin[0]
	cpus := l.cpuSets(pinned)
	s, err := l.iperfServer(t, cpus)
	if err != nil {
		return st, err
	}
	defer s.stop(time.Second)
	if st.gbps, st.retr, err = l.iperf(ctx, t, cpus, 1, l.o.IPerfTime, row.CC); err != nil {
		return st, err
	}
	srv, cli := t.Places["cgw"], t.Places["loadgen"]
	c, err := l.startCHF(ctx, t, pinned)
	if err != nil {
		return st, err
	}
	defer c.stop()
	// The bulk flow runs through ramp-up, warm-up and the measured window.
	bulkFor := 1 + int((l.o.Warmup + l.o.Duration + 3*time.Second).Seconds())
	bulk, err := start("iperf3-bulk", cli.NS, cpus["loadgen"], nil, l.o.Logs, l.o.IPerf3, "-c", srv.Addr, "-p", strconv.Itoa(iperfPort), "-t", strconv.Itoa(bulkFor), "-C", row.CC)
	if err != nil {
		return st, err
	}
	defer bulk.stop(time.Second)
	file := filepath.Join(l.o.Out, "runs", fmt.Sprintf("shaping-%s-%s-t%d.json", row.Queue, row.CC, trial))
	if err := l.load(ctx, c, pinned, l.o.Rate, file, "shaping "+row.Queue+" "+row.CC); err != nil {
		return st, err
	}
	var tr Trial
	if err := tr.read(file); err != nil {
		return st, err
	}
	st.p50, st.p99, st.errs = tr.P50Ms, tr.P99Ms, float64(tr.Errors)
	return st, c.alive()
}

func shapingTable(rows []ShapingRow) ([]string, [][]string) {
	head := []string{"queue", "congestion control (iperf3)", "the CHF's sockets", "tbf limit / burst bytes", "iperf3 Gbit/s", "iperf3 retransmits", "CHF p50 ms (with bulk flow)", "CHF p99 ms (with bulk flow)", "CHF errors"}
	var out [][]string
	for _, r := range rows {
		lim := "no shaper"
		if r.Queue != "none" {
			lim = fmt.Sprintf("%d / %d", r.LimitBytes, r.BurstBytes)
		}
		if len(r.trials) == 0 && len(r.Failures) > 0 {
			out = append(out, []string{r.Queue, r.CC, r.CHFCC, lim, "failed: " + r.Failures[0], "", "", "", ""})
			continue
		}
		out = append(out, []string{r.Queue, r.CC, r.CHFCC, lim, cell(r.IPerf3Gbps, 3), cell(r.Retransmits, 0), cell(r.P50Ms, 3), cell(r.P99Ms, 3), cell(r.Errors, 0)})
	}
	return head, out
}

// nsDefaultCC reads the default congestion control in namespace ns.
func nsDefaultCC(ctx context.Context, ns string) string {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
