package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Streams is the parallel stream count of the several-streams iperf3 run.
const Streams = 4

// Network is the datapath measured alone, between the client's pod and
// the cgw's pod (the path of the CHF's requests across the fabric).
type Network struct {
	// IPerf3Gbps is TCP goodput in Gbit/s, one stream and Streams streams.
	IPerf3Gbps Pair `json:"iperf3_gbps"`
	// Retransmits counts TCP retransmissions of the same runs.
	Retransmits Pair `json:"iperf3_retransmits"`
	// Missing says why iperf3 was not run.
	Missing string `json:"iperf3_missing,omitempty"`
	RTTUs   RTT    `json:"rtt_us"`
}

// Pair is one figure for a single stream and for Streams streams.
type Pair struct {
	Single float64 `json:"single"`
	Multi  float64 `json:"streams4"`
}

// network measures iperf3 (one and Streams streams) and the RR probe.
func (l *Lab) network(ctx context.Context, t *Topology, pinned bool) (Network, error) {
	var n Network
	srv, cli := t.Places["cgw"], t.Places["loadgen"]
	cpus := l.cpuSets(pinned)
	if l.o.IPerf3 == "" {
		n.Missing = "iperf3 not installed (Debian package iperf3)"
	} else {
		srv, err := l.iperfServer(t, cpus)
		if err != nil {
			return n, err
		}
		defer srv.stop(time.Second)
		for i, streams := range []int{1, Streams} {
			gbps, retr, err := l.iperf(ctx, t, cpus, streams, l.o.IPerfTime, "")
			if err != nil {
				return n, errors.Join(err, srv.exited())
			}
			if i == 0 {
				n.IPerf3Gbps.Single, n.Retransmits.Single = gbps, retr
			} else {
				n.IPerf3Gbps.Multi, n.Retransmits.Multi = gbps, retr
			}
		}
	}
	addr := srv.HostPort(probePort)
	ps, err := start("probe-server", srv.NS, cpus["cgw"], nil, l.o.Logs, l.o.Loadgen, "lab", "probe-server", "--listen", addr)
	if err != nil {
		return n, err
	}
	defer ps.stop(time.Second)
	if err := l.wait(ctx, cli.NS, addr, ""); err != nil {
		return n, fmt.Errorf("the probe server is not reachable: %w", errors.Join(err, ps.exited()))
	}
	out, err := runOut(ctx, cli.NS, cpus["loadgen"], nil, l.o.Logs, l.o.Loadgen, "lab", "probe", "--connect", addr, "--count", strconv.Itoa(l.o.ProbeCount))
	if err != nil {
		return n, err
	}
	if err := json.Unmarshal(out, &n.RTTUs); err != nil {
		return n, fmt.Errorf("cannot decode the probe's result %q: %w", out, err)
	}
	return n, nil
}

// iperfServer starts an iperf3 server next to the cgw.
func (l *Lab) iperfServer(t *Topology, cpus map[string]string) (*proc, error) {
	srv := t.Places["cgw"]
	return start("iperf3-server", srv.NS, cpus["cgw"], nil, l.o.Logs, l.o.IPerf3, "-s", "-B", srv.Addr, "-p", strconv.Itoa(iperfPort))
}

// iperf runs an iperf3 client in the client's namespace against the
// iperfServer for d with streams parallel streams; it returns the received
// Gbit/s and the sender's retransmits. cc, when set, is the congestion
// control (-C).
func (l *Lab) iperf(ctx context.Context, t *Topology, cpus map[string]string, streams int, d time.Duration, cc string) (float64, float64, error) {
	srv, cli := t.Places["cgw"], t.Places["loadgen"]
	args := []string{l.o.IPerf3, "-c", srv.Addr, "-p", strconv.Itoa(iperfPort), "-t", strconv.Itoa(int(d.Seconds())), "-P", strconv.Itoa(streams), "-J"}
	if cc != "" {
		args = append(args, "-C", cc)
	}
	// The server needs a moment to listen; a TCP readiness probe would
	// count as a test client, so the client retries instead (iperf3 -J
	// may exit 0 with the error in its JSON).
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := runOut(ctx, cli.NS, cpus["loadgen"], nil, l.o.Logs, args...)
		gbps, retr, perr := parseIPerf(out)
		if err == nil && perr == nil {
			return gbps, retr, nil
		}
		err = errors.Join(err, perr)
		if ctx.Err() != nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "unable to connect") {
			return 0, 0, fmt.Errorf("iperf3: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// parseIPerf returns the received Gbit/s and the retransmits of iperf3 -J output.
func parseIPerf(out []byte) (float64, float64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			Sent struct {
				Retransmits float64 `json:"retransmits"`
			} `json:"sum_sent"`
			Received struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, 0, fmt.Errorf("cannot decode iperf3's JSON %q: %w", firstLine(out), err)
	}
	if r.Error != "" {
		return 0, 0, errors.New(r.Error)
	}
	return r.End.Received.BPS / 1e9, r.End.Sent.Retransmits, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// NetworkConfig is the network-alone measurement between two network
// namespaces the lab did not make (a cluster's pods): iperf3 and the
// request/response probe run in them with this machine's binaries.
type NetworkConfig struct {
	// Server is where the CGW runs (iperf3 -s, the probe server);
	// Client is where the load generator runs.
	Server, Client Place
	// Loadgen is the loadgen binary (its `lab probe` commands); IPerf3
	// the iperf3 binary (empty: Network.Missing says so).
	Loadgen, IPerf3 string
	IPerfTime       time.Duration
	ProbeCount      int
	Logs            io.Writer
}

// MeasureNetwork measures the network alone between c.Client and
// c.Server, as the lab does between its load generator's and its CGW's
// pods.
func MeasureNetwork(ctx context.Context, c NetworkConfig) (Network, error) {
	if c.IPerfTime <= 0 {
		c.IPerfTime = 2 * time.Second
	}
	if c.ProbeCount <= 0 {
		c.ProbeCount = 2000
	}
	l := New(Options{Loadgen: c.Loadgen, IPerf3: c.IPerf3, IPerfTime: c.IPerfTime, ProbeCount: c.ProbeCount, Logs: c.Logs})
	t := &Topology{Places: map[string]Place{"cgw": c.Server, "loadgen": c.Client}}
	return l.network(ctx, t, false)
}
