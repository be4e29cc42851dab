package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/cluster/kube"
	"github.com/chf-testbed/testbed/loadgen/lab"
)

// SweepAccounts is how many accounts the chf chart provisions when the
// model's capacity is swept (the small values' 5000 would leave each of
// the sweep's attempts too few): the emulated lab's default, so both
// datapaths' sweeps give each attempt as many subscribers.
const SweepAccounts = 20_000

// sweepWait bounds a knee sweep: its steps (lab.KneeSweepArgs: at most 40,
// each retried) of the run's duration and a few seconds of set-up each.
func sweepWait(seconds int) time.Duration {
	return time.Duration(40*3+3) * (time.Duration(seconds)*time.Second + 10*time.Second)
}

// sweepKnee finds model m's knee: `loadgen sweep` with the lab's steps and
// SLO (lab.KneeSweepArgs) from the load generator's node (its network
// namespace, as a host-network pod there) to the CGW across the fabric.
// On a pinned model it runs on the node's shared CPU pool (the kubelet's
// static CPU manager's), not on the pinned pods' CPUs. Every step's
// result, with the loadgen's own CPU and the host-freeze probe's figures,
// is in the sweep's directory.
func sweepKnee(ctx context.Context, o Options, s *kube.State, m Model, r *Run, out string) error {
	node := s.Nodes[0]
	if len(s.Nodes) > 1 {
		node = s.Nodes[Placement["loadgen"]]
	}
	args := []string{"netns", "exec", node.Netns}
	if m.Pinned {
		cpus, err := kube.SharedCPUs(node)
		if err != nil {
			return err
		}
		args = append(args, "taskset", "-c", cpus)
	}
	dir := filepath.Join(out, "sweep")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args = append(args, o.Loadgen, "sweep", "--target", fmt.Sprintf("http://10.0.0.21:%d", m.Port),
		"--duration", strconv.Itoa(o.Seconds)+"s", "--warmup", "2s", "--ramp-up", "1s",
		"--subscribers", strconv.Itoa(SweepAccounts), "--progress", "off", "--log-level", "warn", "--label", m.Name)
	args = append(args, lab.KneeSweepArgs(SweepAccounts, o.KneeP99)...)
	args = append(args, "--out", dir)
	logf, err := os.Create(filepath.Join(dir, "sweep.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	sctx, cancel := context.WithTimeout(ctx, sweepWait(o.Seconds))
	defer cancel()
	cmd := exec.CommandContext(sctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Interrupted, the sweep writes what it has and exits; it is killed
	// if that takes longer than 10 s.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	o.Log("%s: knee sweep from %s (p99 <= %v, late <= 5%%; its log: %s)", m.Name, node.Name, o.KneeP99, logf.Name())
	rerr := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if sctx.Err() != nil {
		return fmt.Errorf("the knee sweep outlasted %v", sweepWait(o.Seconds))
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		return errors.Join(rerr, fmt.Errorf("cannot read the knee sweep's result (its log: %s): %w", logf.Name(), err))
	}
	knee, notes, err := lab.KneeOf(b)
	if err != nil {
		return err
	}
	r.KneeTPS, r.KneeNotes, r.Sweep = &knee, notes, filepath.Join(dir, "sweep.json")
	o.Log("%s: knee %.0f TPS", m.Name, knee)
	return nil
}
