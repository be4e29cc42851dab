// Package plan is a capacity model on paper: from one measured run
// (report.Result) it sizes a deployment for a target rate — pods and
// cores per CHF service and the Aerospike cluster's memory — assuming CPU
// per transaction stays what was measured, and says so.
//
// It does not model the network, latency, the knee of a queue, or CPU
// that does not scale with transactions (idle costs are in the measured
// µs/txn, which is why a run near the target's per-pod rate plans best).
package plan

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/chf-testbed/testbed/abm/record"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// ErrInput is returned for a result or option the plan cannot use.
var ErrInput = errors.New("plan: unusable input")

// Options are the target and the assumptions.
type Options struct {
	TPS float64 // target transactions per second
	// Utilisation is the share of each core the plan allows itself to
	// use (0.6: 40% headroom for bursts, failover and GC).
	Utilisation float64
	PodCores    float64 // cores of one CHF pod (the reference: 2 vCPU)
	// Subscribers is the account count to size Aerospike for; 0 = the
	// run's subscriber range.
	Subscribers int
	// Replication is Aerospike's replication factor.
	Replication int
	// RecordBaseBytes is an account record's size without sessions (key,
	// the bal/cur/deb bins, an empty session blob and Aerospike's per
	// record and per bin overheads); IndexBytes Aerospike's primary index
	// entry per record and replica.
	RecordBaseBytes int
	IndexBytes      int
	// NodeMemory is the memory of one Aerospike node given to data and
	// index; HighWater the share of it the plan fills.
	NodeMemory int64
	HighWater  float64
}

// Defaults returns the assumptions of the reference deployment.
func Defaults() Options {
	return Options{
		Utilisation: 0.6, PodCores: 2, Replication: 2,
		RecordBaseBytes: 128, IndexBytes: 64,
		NodeMemory: 64 << 30, HighWater: 0.6,
	}
}

// Row is one component's share of the plan.
type Row struct {
	Component string
	UsPerTxn  float64 // measured CPU µs per transaction
	Cores     float64 // needed at the target rate and utilisation
	Pods      int     // CHF services: cores / PodCores, rounded up (at least 2)
}

// Plan is the sizing.
type Plan struct {
	Opt      Options
	From     string  // the result's file
	Measured float64 // the run's achieved TPS
	Rows     []Row   // cgw, ocp, abm, then the database, then others
	// CHFCores is the cores of the CHF services' pods (pods × PodCores).
	CHFCores float64
	// Aerospike: the database's cores from the measured store's CPU, and
	// its memory: Subscribers × (IndexBytes + record) × Replication, the
	// record being RecordBaseBytes plus the open sessions per account ×
	// record.SessionRecordBytes; OpenSessions is the scenario's steady state
	// (Little's law) at the target rate, MeasuredOpen what the run had
	// open at the end of its window.
	DBComponent   string
	DBCores       float64
	OpenSessions  float64
	MeasuredOpen  int64
	RecordBytes   float64
	MemoryBytes   float64
	Nodes         int
	StoreRSSBytes int64 // the measured store's RSS, for comparison
}

// services are the CHF services sized as pods.
var services = []string{"cgw", "ocp", "abm"}

// databases are the component names a store's CPU is measured under
// ("asd": the real server one node of which loadgen local --store asd
// started).
var databases = []string{"aerospike", "asd", "aslite"}

// MaxTPS bounds --tps: far beyond any deployment, low enough that every
// figure of the plan stays a number.
const MaxTPS = 1e9

// maxCount bounds the pods and nodes a plan may come to; beyond it the
// inputs are wrong (a result whose CPU figures are absurd).
const maxCount = 1 << 31

// Check reports options the plan cannot use, naming the flag.
func (o Options) Check() error {
	switch {
	case !(o.TPS > 0 && o.TPS <= MaxTPS):
		return fmt.Errorf("%w: --tps must be a positive number up to %.0f, got %v", ErrInput, float64(MaxTPS), o.TPS)
	case !(o.Utilisation > 0 && o.Utilisation <= 1):
		return fmt.Errorf("%w: --utilisation must be in (0, 1], got %v", ErrInput, o.Utilisation)
	case !(o.PodCores > 0 && o.PodCores <= 1024):
		return fmt.Errorf("%w: --pod-cores must be in (0, 1024], got %v", ErrInput, o.PodCores)
	case o.Replication < 1 || o.Replication > 128:
		return fmt.Errorf("%w: --replication must be 1..128, got %d", ErrInput, o.Replication)
	case o.Subscribers < 0 || o.Subscribers > 1e12:
		return fmt.Errorf("%w: --subscribers must be 0..1000000000000, got %d", ErrInput, o.Subscribers)
	case o.RecordBaseBytes < 0 || o.RecordBaseBytes > 1<<30:
		return fmt.Errorf("%w: --record-bytes must be 0..%d, got %d", ErrInput, 1<<30, o.RecordBaseBytes)
	case o.IndexBytes < 0 || o.IndexBytes > 1<<20:
		return fmt.Errorf("%w: --index-bytes must be 0..%d, got %d", ErrInput, 1<<20, o.IndexBytes)
	case !(o.HighWater > 0 && o.HighWater <= 1):
		return fmt.Errorf("%w: --high-water must be in (0, 1], got %v", ErrInput, o.HighWater)
	case o.NodeMemory <= 0:
		return fmt.Errorf("%w: --node-memory must be positive, got %d", ErrInput, o.NodeMemory)
	}
	return nil
}

// Make computes the plan for o from r (read from file from).
func Make(r *report.Result, from string, o Options) (*Plan, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if r.Transactions <= 0 || !(r.TPS > 0) {
		return nil, fmt.Errorf("%w: %s has no completed transaction to measure CPU per transaction from", ErrInput, from)
	}
	p := &Plan{Opt: o, From: from, Measured: r.TPS}
	us := func(c string) (float64, bool) {
		v, ok := r.CPUSeconds[c]
		return v * 1e6 / float64(r.Transactions), ok
	}
	cores := func(u float64) float64 { return o.TPS * u / 1e6 / o.Utilisation }
	for _, c := range services {
		u, ok := us(c)
		if !ok {
			return nil, fmt.Errorf("%w: %s has no CPU figure for %s (run with its --cpu source, as loadgen local does)", ErrInput, from, c)
		}
		if u < 0 {
			return nil, fmt.Errorf("%w: %s has a negative CPU figure for %s", ErrInput, from, c)
		}
		row := Row{Component: c, UsPerTxn: u, Cores: cores(u)}
		pods := math.Ceil(row.Cores / o.PodCores)
		if !(pods < maxCount) {
			return nil, fmt.Errorf("%w: %s at %.0f TPS needs %.3g pods: check --tps and %s's CPU figures", ErrInput, c, o.TPS, pods, from)
		}
		row.Pods = max(2, int(pods)) // two for availability
		p.CHFCores += float64(row.Pods) * o.PodCores
		p.Rows = append(p.Rows, row)
	}
	for _, c := range databases {
		if u, ok := us(c); ok {
			p.DBComponent, p.DBCores = c, cores(u)
			p.Rows = append(p.Rows, Row{Component: c, UsPerTxn: u, Cores: p.DBCores})
			p.StoreRSSBytes = r.Memory[c].RSS
			break
		}
	}
	var others []string
	for c := range r.CPUSeconds {
		if c != report.LoadgenComponent && c != p.DBComponent && !contains(services, c) {
			others = append(others, c)
		}
	}
	sort.Strings(others)
	for _, c := range others {
		u, _ := us(c)
		p.Rows = append(p.Rows, Row{Component: c, UsPerTxn: u, Cores: cores(u)})
	}
	subs := o.Subscribers
	if subs <= 0 {
		subs = r.Scenario.Subscribers.Count
	}
	p.Opt.Subscribers = subs
	if off := r.Scenario.OfferedTPS(); off > 0 {
		p.OpenSessions = r.Scenario.OpenSessions() * o.TPS / off
	}
	if s := r.Sessions; s != nil {
		p.MeasuredOpen = s.OpenEnd
	}
	p.RecordBytes = float64(o.RecordBaseBytes) + p.OpenSessions/float64(subs)*record.SessionRecordBytes
	p.MemoryBytes = float64(subs) * (float64(o.IndexBytes) + p.RecordBytes) * float64(o.Replication)
	nodes := math.Ceil(p.MemoryBytes / (float64(o.NodeMemory) * o.HighWater))
	if !(nodes < maxCount) {
		return nil, fmt.Errorf("%w: Aerospike would need %.3g nodes: check --tps, --subscribers, --node-memory and %s's session figures", ErrInput, nodes, from)
	}
	p.Nodes = max(o.Replication, int(nodes))
	return p, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Write prints the plan and its assumptions.
func (p *Plan) Write(w io.Writer) {
	o := p.Opt
	fmt.Fprintf(w, "plan for %.0f TPS at %.0f%% CPU utilisation, from %s (measured %.0f TPS)\n\n", o.TPS, 100*o.Utilisation, p.From, p.Measured)
	fmt.Fprintf(w, "%-10s %12s %10s %6s\n", "component", "CPU µs/txn", "cores", "pods")
	var total float64
	for _, r := range p.Rows {
		pods := "-"
		if r.Pods > 0 {
			pods = fmt.Sprint(r.Pods)
		}
		fmt.Fprintf(w, "%-10s %12.1f %10.1f %6s\n", r.Component, r.UsPerTxn, r.Cores, pods)
		total += r.Cores
	}
	fmt.Fprintf(w, "%-10s %12s %10.1f\n", "total", "", total)
	fmt.Fprintf(w, "\nCHF pods: %s = %.0f cores (pods of %g cores)\n", p.podList(), p.CHFCores, o.PodCores)
	if p.DBComponent != "" {
		fmt.Fprintf(w, "Aerospike CPU: %.1f cores (from %s's measured CPU)\n", p.DBCores, p.DBComponent)
	}
	fmt.Fprintf(w, "Aerospike memory: %d accounts × (%d B index + %.0f B record) × %d replicas = %.1f GiB; %d nodes of %.0f GiB at %.0f%% fill\n",
		o.Subscribers, o.IndexBytes, p.RecordBytes, o.Replication, p.MemoryBytes/(1<<30), p.Nodes, float64(o.NodeMemory)/(1<<30), 100*o.HighWater)
	fmt.Fprintf(w, "  record = %d B base + %.3f open sessions per account × %d B (%.0f sessions open at %.0f TPS: the scenario's\n"+
		"  steady state scaled to the rate; the run had %d open at its window's end)\n",
		o.RecordBaseBytes, p.OpenSessions/float64(o.Subscribers), record.SessionRecordBytes, p.OpenSessions, o.TPS, p.MeasuredOpen)
	if p.StoreRSSBytes > 0 {
		fmt.Fprintf(w, "  (the run's %s held its accounts in %.0f MiB RSS)\n", p.DBComponent, float64(p.StoreRSSBytes)/(1<<20))
	}
	fmt.Fprintf(w, "\nAssumptions: CPU per transaction stays what the run measured, at any rate and per pod (it falls as batches grow, so a\n"+
		"run at a low rate over-sizes); the mix and session shape are the run's; cores = TPS × µs/txn / utilisation; every\n"+
		"service at least 2 pods; loadgen's CPU is not part of the plan; the store's CPU stands in for Aerospike's (aslite is\n"+
		"not Aerospike: treat it as an order of magnitude); Aerospike memory counts the primary index and in-memory data, not\n"+
		"the OS, defragmentation or migrations' headroom (the high-water mark stands for those). Network, latency and the\n"+
		"knee are not modelled: confirm with a sweep on the deployment.\n")
}

func (p *Plan) podList() string {
	var parts []string
	for _, r := range p.Rows {
		if r.Pods > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r.Component, r.Pods))
		}
	}
	return strings.Join(parts, ", ")
}
