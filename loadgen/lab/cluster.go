package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClusterOptions runs the same comparison on a real cluster beside the
// emulation: `cluster e2e` (cmd/cluster) starts nodes on this machine,
// each a network namespace with its own containerd, kubelet and
// kube-proxy, installs the charts of each model with real CNI plugins,
// drives them with the loadgen Job, and tears everything down; its runs
// become the report's datapath "cni" rows, beside the emulated rows of
// the same model.
type ClusterOptions struct {
	// Bin is the cluster binary; KubeBin the Kubernetes binaries'
	// directory (cluster/build.sh); Helm the helm binary; Repo the
	// repository root whose charts are installed.
	Bin, KubeBin, Helm, Repo string
	// Nodes is how many nodes (2: the lab's placement across the fabric).
	Nodes int
	// Models are cluster e2e's models (empty: all of them).
	Models []string
	// Shards is the loadgen Job's shard count.
	Shards int
	// Images are the image archives imported into the nodes (empty:
	// cluster e2e's default, make images' output under Repo).
	Images []string
}

// clusterRun is what the lab reads of cluster e2e's runs.json (one run of
// a model; cluster/e2e.Run).
type clusterRun struct {
	Model    string   `json:"model"`
	Emulated string   `json:"emulated"`
	Pinned   bool     `json:"pinned"`
	StandsIn string   `json:"stands_in"`
	Trial    int      `json:"trial"`
	Merged   string   `json:"merged"`
	JobError string   `json:"job_error"`
	Network  *Network `json:"network"`
	// KneeTPS, KneeNotes: the knee sweep of the model's first trial
	// (the lab's --sweep).
	KneeTPS   *float64 `json:"knee_tps"`
	KneeNotes []string `json:"knee_notes"`
}

// clusterWait bounds cluster e2e's tear-down after the lab is interrupted.
const clusterWait = 3 * time.Minute

// cluster runs cluster e2e with the lab's rate, duration and trials and
// adds its runs to the report as datapath "cni" rows.
func (l *Lab) cluster(ctx context.Context, rep *Report) error {
	c := l.o.Cluster
	top, err := filepath.Abs(l.o.Out)
	if err != nil {
		return err
	}
	out := filepath.Join(top, "cluster")
	args := []string{"e2e", "--dir", filepath.Join(top, "cluster-state"), "--bin", c.KubeBin, "--helm", c.Helm, "--repo", c.Repo,
		"--out", out, "--nodes", strconv.Itoa(c.Nodes), "--trials", strconv.Itoa(l.o.Trials),
		"--rate", strconv.Itoa(int(l.o.Rate)), "--duration", strconv.Itoa(int(l.o.Duration.Seconds())),
		"--shards", strconv.Itoa(max(1, c.Shards)), "--loadgen", l.o.Loadgen}
	if l.o.Sweep {
		args = append(args, "--sweep", "--knee-slo-p99", l.o.KneeP99.String())
	}
	if len(c.Models) > 0 {
		args = append(args, "--models", strings.Join(c.Models, ","))
	}
	if len(c.Images) > 0 {
		args = append(args, "--images", strings.Join(c.Images, ","))
	}
	l.progress("cluster: %s %s", c.Bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Dir = c.Repo // where the images' default paths and tag are
	// Interrupted, cluster e2e tears its cluster down (SIGINT) before it
	// exits; it is killed only if that outlasts clusterWait.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = clusterWait
	cmd.Stdout, cmd.Stderr = &prefixWriter{prefix: "cluster | ", out: l.o.Logs}, &prefixWriter{prefix: "lab: ", out: l.o.Progress}
	rerr := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b, err := os.ReadFile(filepath.Join(out, "runs.json"))
	if err != nil {
		if rerr != nil {
			err = errors.Join(fmt.Errorf("cluster e2e (its log is in lab.log): %w", rerr), err)
		}
		return fmt.Errorf("cannot read cluster e2e's runs: %w", err)
	}
	var runs []clusterRun
	if err := json.Unmarshal(b, &runs); err != nil {
		return fmt.Errorf("cannot decode %s: %w", filepath.Join(out, "runs.json"), err)
	}
	rows := map[string]*Row{}
	for _, cr := range runs {
		key := cr.Model
		r, ok := rows[key]
		if !ok {
			r = &Row{Model: cr.Emulated, Datapath: DatapathCNI, ClusterModel: cr.Model, Emulation: "cni: " + cr.StandsIn, Pinned: cr.Pinned}
			rows[key] = r
			rep.Rows = append(rep.Rows, r)
		}
		if cr.KneeTPS != nil {
			r.KneeTPS, r.KneeRetried = cr.KneeTPS, cr.KneeNotes
		}
		if cr.Merged == "" {
			r.Failures = append(r.Failures, fmt.Sprintf("trial %d: no result", cr.Trial))
			continue
		}
		t := Trial{Trial: cr.Trial, File: cr.Merged}
		if err := t.read(cr.Merged); err != nil {
			r.Failures = append(r.Failures, fmt.Sprintf("trial %d: %v", cr.Trial, err))
			continue
		}
		if cr.Network != nil {
			t.Network = *cr.Network
		}
		r.Trials = append(r.Trials, t)
	}
	if rerr != nil {
		return fmt.Errorf("cluster e2e (its log is in lab.log): %w", rerr)
	}
	return nil
}
