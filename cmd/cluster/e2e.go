package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/cluster/e2e"
	"github.com/chf-testbed/testbed/cluster/kube"
	"github.com/chf-testbed/testbed/loadgen/compare"
)

// e2eCmd: up, every model's runs (trials interleaved), the comparison,
// down (always, also on failure and on SIGINT/SIGTERM).
func e2eCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := newFlags("e2e", stderr)
	bin := fs.String("bin", "", "directory of the Kubernetes binaries (cluster/build.sh prints it) (required)")
	images, pause := imageFlags(fs)
	models := fs.String("models", "", "comma-separated models, of "+modelNames()+" (default: all)")
	trials := fs.Int("trials", 3, "runs of each model, interleaved (1..20)")
	rate := fs.Int("rate", 500, "offered TPS of each run, over all shards (1..100000)")
	shards := fs.Int("shards", 2, "loadgen Job shards (1..16)")
	seconds := fs.Int("duration", 10, "measured seconds of each run (1..3600)")
	out := fs.String("out", "", "results directory (default results/cluster-<time>)")
	helm := fs.String("helm", ".tools/bin/helm", "the helm binary")
	repo := fs.String("repo", ".", "the repository root (its charts/ are installed)")
	keep := fs.Bool("keep", false, "leave the cluster up at the end (cluster down tears it down)")
	nodes := nodesFlag(fs)
	loadgenBin := fs.String("loadgen", "", "the loadgen binary: with it, each run also measures the network alone between the CGW's pod and a pod on the load generator's node (loadgen lab's request/response probe, and iperf3 when installed)")
	sweep := fs.Bool("sweep", false, "with --loadgen: each model's first trial also finds its knee, loadgen sweep from the load generator's node with loadgen lab's steps and SLO (the chart then provisions 20000 accounts)")
	kneeP99 := fs.Duration("knee-slo-p99", 50*time.Millisecond, "p99 limit of the --sweep knee sweeps (as loadgen lab's)")
	if code, done := parse(fs, args); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "cluster e2e: "+format+"\n", a...)
		return 2
	}
	switch {
	case *bin == "":
		return bad("--bin is required")
	case *images == "" || *pause == "":
		return bad("--images and --pause-image must not be empty (make images builds them)")
	case *trials < 1 || *trials > 20:
		return bad("--trials must be 1..20, got %d", *trials)
	case *rate < 1 || *rate > 100000:
		return bad("--rate must be 1..100000, got %d", *rate)
	case *shards < 1 || *shards > 16:
		return bad("--shards must be 1..16, got %d", *shards)
	case *seconds < 1 || *seconds > 3600:
		return bad("--duration must be 1..3600 (seconds), got %d", *seconds)
	case *nodes < 1 || *nodes > kube.MaxNodes:
		return bad("--nodes must be 1..%d, got %d", kube.MaxNodes, *nodes)
	case *sweep && *loadgenBin == "":
		return bad("--sweep needs --loadgen (the sweep's load generator)")
	case *kneeP99 <= 0 || *kneeP99 > time.Minute:
		return bad("--knee-slo-p99 must be in (0, 1m], got %v", *kneeP99)
	}
	var ms []e2e.Model
	if *models == "" {
		ms = e2e.Models
	} else {
		for _, n := range strings.Split(*models, ",") {
			m, ok := e2e.ModelByName(strings.TrimSpace(n))
			if !ok {
				return bad("--models: unknown model %q (models: %s)", n, modelNames())
			}
			ms = append(ms, m)
		}
	}
	if *out == "" {
		*out = filepath.Join("results", "cluster-"+time.Now().UTC().Format("20060102-150405"))
	}
	log := logTo(stderr)
	d, _ := filepath.Abs(*dir)
	b, _ := filepath.Abs(*bin)
	o := e2e.Options{Dir: d, Log: log, Rate: *rate, Shards: *shards, Seconds: *seconds, Sweep: *sweep, KneeP99: *kneeP99}
	if p, err := exec.LookPath("iperf3"); err == nil {
		o.IPerf3 = p
	}
	if *loadgenBin != "" {
		o.Loadgen, _ = filepath.Abs(*loadgenBin)
	}
	o.Out, _ = filepath.Abs(*out)
	o.Repo, _ = filepath.Abs(*repo)
	o.Helm, _ = filepath.Abs(*helm)
	var imgs []string
	for _, i := range strings.Split(*images, ",") {
		abs, _ := filepath.Abs(strings.TrimSpace(i))
		imgs = append(imgs, abs)
	}
	// Models that need another pod network between nodes (the overlay)
	// run on a cluster of their own, after the others.
	var groups [][]e2e.Model
	for _, m := range ms {
		k := slices.IndexFunc(groups, func(g []e2e.Model) bool { return g[0].NetworkOf() == m.NetworkOf() })
		if k < 0 {
			groups = append(groups, nil)
			k = len(groups) - 1
		}
		groups[k] = append(groups[k], m)
	}
	var runs []*e2e.Run
	var upS []float64
	var err error
	for i, g := range groups {
		var r []*e2e.Run
		var s float64
		r, s, err = e2eCluster(ctx, kube.Config{Dir: d, Bin: b, Images: imgs, PauseImage: *pause, Nodes: *nodes, Network: g[0].NetworkOf(), Log: log},
			o, g, *trials, *keep && i == len(groups)-1, stderr)
		runs = append(runs, r...)
		upS = append(upS, s)
		if err != nil {
			break
		}
	}
	if werr := writeSummary(o.Out, runs, upS, stdout); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintf(stderr, "cluster e2e: %v\n", err)
		return exitFor(ctx)
	}
	return 0
}

// e2eCluster brings a cluster up for models (the static CPU manager when
// one is pinned, Multus when one attaches a network), runs their trials
// interleaved, and tears it down unless keep.
func e2eCluster(ctx context.Context, c kube.Config, o e2e.Options, models []e2e.Model, trials int, keep bool, stderr io.Writer) ([]*e2e.Run, float64, error) {
	c.CPUManager = "none"
	for _, m := range models {
		if m.Pinned {
			c.CPUManager = "static"
		}
		c.Multus = c.Multus || m.Multus
	}
	t0 := time.Now()
	if err := kube.Up(ctx, c); err != nil {
		return nil, 0, err
	}
	upS := time.Since(t0).Seconds()
	defer func() {
		if keep && ctx.Err() == nil {
			c.Log("the cluster stays up (--keep): cluster down --dir %s", c.Dir)
			return
		}
		if err := kube.Down(context.WithoutCancel(ctx), c.Dir, c.Log); err != nil {
			fmt.Fprintf(stderr, "cluster e2e: %v\n", err)
		}
	}()
	runs, err := e2e.RunAll(ctx, o, models, trials)
	return runs, upS, err
}

func exitFor(ctx context.Context) int {
	if ctx.Err() != nil {
		return 130
	}
	return 1
}

func modelNames() string {
	var n []string
	for _, m := range e2e.Models {
		n = append(n, m.Name)
	}
	return strings.Join(n, ",")
}

// writeSummary writes runs.json, the per-model table (medians and ranges
// over the trials) and the comparison (loadgen compare's columns) of each
// model's median run.
func writeSummary(out string, runs []*e2e.Run, upS []float64, stdout io.Writer) error {
	if len(runs) == 0 {
		return nil
	}
	b, _ := json.MarshalIndent(runs, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "runs.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	by := map[string][]*e2e.Run{}
	var order []string
	for _, r := range runs {
		if _, ok := by[r.Model]; !ok {
			order = append(order, r.Model)
		}
		by[r.Model] = append(by[r.Model], r)
	}
	var md strings.Builder
	ups := make([]string, len(upS))
	for i, u := range upS {
		ups[i] = fmt.Sprintf("%.1f s", u)
	}
	fmt.Fprintf(&md, "# Cluster e2e: the charts on a real node\n\ncluster up: %s (one cluster per pod network). Medians over the trials (range in brackets).\n\n", strings.Join(ups, ", "))
	md.WriteString("| model | trials | chart Ready s | TPS | p50 ms | p99 ms | SUT µs/txn (/metrics) | audit | discovery | loadgen Job | knee TPS |\n|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|\n")
	var cmp []compare.Run
	for _, m := range order {
		rs := by[m]
		f := func(v func(*e2e.Run) float64) string {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = v(r)
			}
			sort.Float64s(xs)
			return fmt.Sprintf("%.1f [%.1f–%.1f]", xs[len(xs)/2], xs[0], xs[len(xs)-1])
		}
		audit, disc, job, knee := "PASS", "yes", "passed", "—"
		failed := 0
		for _, r := range rs {
			if r.KneeTPS != nil {
				knee = fmt.Sprintf("%.0f", *r.KneeTPS)
			}
			if r.JobError != "" {
				failed++
				job = fmt.Sprintf("failed %d of %d (thresholds)", failed, len(rs))
			}
			if !r.AuditOK {
				audit = "FAIL"
			}
			if !r.Discovered {
				disc = "no"
			}
		}
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, len(rs),
			f(func(r *e2e.Run) float64 { return r.ChartReadyS }), f(func(r *e2e.Run) float64 { return r.TPS }),
			f(func(r *e2e.Run) float64 { return r.P50Ms }), f(func(r *e2e.Run) float64 { return r.P99Ms }),
			f(func(r *e2e.Run) float64 { return r.SUTUsTxn }), audit, disc, job, knee)
		sorted := slices.Clone(rs)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].SUTUsTxn < sorted[j].SUTUsTxn })
		if med := sorted[len(sorted)/2]; med.Merged != "" {
			if r, err := compare.Load(med.Merged, m); err == nil {
				cmp = append(cmp, r)
			}
		}
	}
	if len(cmp) > 0 {
		if t, err := compare.New(cmp, 0); err == nil {
			md.WriteString("\n## Comparison (each model's median run by SUT µs/txn; loadgen compare)\n\n")
			t.WriteMarkdown(&md)
		}
	}
	fmt.Fprint(stdout, md.String())
	return os.WriteFile(filepath.Join(out, "cluster-e2e.md"), []byte(md.String()), 0o644)
}
