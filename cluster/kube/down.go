package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fixedPaths are the paths outside the cluster's directory that the
// kubelet, containerd's shims and CNI use whatever they are configured
// with; the ones `up` found missing are removed by `down`.
var fixedPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd", netnsDir}

// MissingFixedPaths lists the fixed paths that do not exist now: what a
// cluster started now may create outside its directory.
func MissingFixedPaths() []string { return missing(fixedPaths) }

func missing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// podNetns lists the cni-* network namespaces (containerd's pods').
func podNetns() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cni-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Down tears down the cluster in dir: every process, container, mount,
// network namespace, link, route, iptables rule and cgroup it made, and
// the paths outside dir it created. What it keeps is dir's logs. It works
// from the state `up` wrote, and without one (a start that failed early)
// from the fixed names. Running it twice is harmless.
func Down(ctx context.Context, dir string, log func(string, ...any)) error {
	if log == nil {
		log = func(string, ...any) {}
	}
	s, err := LoadState(dir)
	if errors.Is(err, ErrNoCluster) {
		s = &State{Dir: dir, Nodes: []NodeState{NewNode(dir, 0)}}
		s.PodNetnsBefore, _ = podNetns() // unknown: leave every cni-* alone
	} else if err != nil {
		return err
	}
	start := time.Now()
	var errs []error
	for _, n := range s.Nodes {
		log("%s: stopping the kubelet, kube-proxy, the containers and containerd", n.Name)
		stop(n.Dir, "kubelet", 10*time.Second)
		stop(n.Dir, "kube-proxy", 5*time.Second)
		stop(n.Dir, "flanneld", 5*time.Second)
		killCgroup(n.Cgroup)
		for _, pid := range oursAll(n.Dir) { // the shims, and containerd last
			if pid2, ok := pidOf(n.Dir, "containerd"); !ok || pid2 != pid {
				kill(pid, n.Dir, 2*time.Second)
			}
		}
		stop(n.Dir, "containerd", 10*time.Second)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if now, err := podNetns(); err == nil {
		for _, ns := range now {
			if !slices.Contains(s.PodNetnsBefore, ns) {
				removeNetns(ns)
			}
		}
	}
	for _, n := range s.Nodes {
		removeNetns(n.Netns)
		_, _ = run(ctx, "ip", "link", "del", n.Veth)
		_, _ = run(ctx, "ip", "link", "del", n.Uplink())
		removeCgroup(n.Cgroup)
	}
	removeCgroup("/" + CgroupParent)
	for _, b := range []string{Fabric, SriovSwitch} {
		_, _ = run(ctx, "ip", "link", "del", b)
		for _, dirn := range []string{"-i", "-o"} {
			for i := 0; i < 10; i++ {
				if _, err := run(ctx, "iptables", "-w", "-D", "FORWARD", dirn, b, "-j", GuardChain); err != nil {
					break
				}
			}
		}
	}
	_, _ = run(ctx, "iptables", "-w", "-F", GuardChain)
	_, _ = run(ctx, "iptables", "-w", "-X", GuardChain)
	log("stopping the control plane")
	for _, p := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		stop(dir, p, 3*time.Second) // their state is thrown away: no need to wait long
	}
	for _, pid := range oursAll(dir) {
		kill(pid, dir, time.Second)
	}
	for _, p := range s.Created {
		if p == netnsDir {
			_ = os.Remove(p) // only when empty: the host may have made some since
			continue
		}
		_ = os.RemoveAll(p)
	}
	if err := removeState(dir); err != nil {
		errs = append(errs, err)
	}
	if left := Leftovers(dir, s.PodNetnsBefore, s.Created); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left after the tear-down: %s", strings.Join(left, "; ")))
	}
	log("torn down in %.1f s", time.Since(start).Seconds())
	return errors.Join(errs...)
}

func removeNetns(name string) {
	p := filepath.Join(netnsDir, name)
	_ = syscall.Unmount(p, syscall.MNT_DETACH)
	_ = os.Remove(p)
}

// cgroupDirs lists the directories of cgroup path rel in every hierarchy
// (cgroup v1: one per controller; v2: one).
func cgroupDirs(rel string) []string {
	if CgroupVersion() == "v2" {
		return []string{filepath.Join("/sys/fs/cgroup", rel)}
	}
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range ents {
		d := filepath.Join("/sys/fs/cgroup", e.Name(), rel)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// killCgroup SIGKILLs every process in the cgroup tree rel (the pods).
func killCgroup(rel string) {
	for i := 0; i < 20; i++ {
		found := false
		for _, d := range cgroupDirs(rel) {
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err != nil || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						found = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup removes the cgroup tree rel, deepest first.
func removeCgroup(rel string) {
	for _, d := range cgroupDirs(rel) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		mp := unescapeMount(fs[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unmountUnder(dir string) error {
	for i := 0; i < 5; i++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("cannot unmount %s", strings.Join(mps, ", "))
	}
	return nil
}

// removeState removes what dir holds but its logs (dir/logs and each
// node's logs).
func removeState(dir string) error {
	var errs []error
	rm := func(d string) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() == "logs" || e.Name() == "nodes" && d == dir {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	rm(dir)
	nodes, _ := os.ReadDir(filepath.Join(dir, "nodes"))
	for _, n := range nodes {
		rm(filepath.Join(dir, "nodes", n.Name()))
	}
	return errors.Join(errs...)
}

// Leftovers lists what a cluster in dir left on the host: processes,
// mounts, network namespaces (its nodes' and pods' but those in
// podNetnsBefore), links, the guard, cgroups, and the created paths.
func Leftovers(dir string, podNetnsBefore, created []string) []string {
	var out []string
	if pids := oursAll(dir); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes %v", pids))
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		out = append(out, "mounts "+strings.Join(mps, ", "))
	}
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, "chf-") || strings.HasPrefix(n, "cni-") && !slices.Contains(podNetnsBefore, n) {
				out = append(out, "network namespace "+n)
			}
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if strings.HasPrefix(i.Name, "chf-") {
				out = append(out, "link "+i.Name)
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/route"); err == nil && strings.Contains(string(b), Fabric) {
		out = append(out, "routes via "+Fabric)
	}
	if _, err := run(context.Background(), "iptables", "-w", "-S", GuardChain); err == nil {
		out = append(out, "iptables chain "+GuardChain)
	}
	if ds := cgroupDirs("/" + CgroupParent); len(ds) > 0 {
		out = append(out, "cgroups "+strings.Join(ds, ", "))
	}
	for _, p := range created {
		if p == netnsDir {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			out = append(out, "path "+p)
		}
	}
	return out
}

// makeCgroup makes the cgroup path rel in every hierarchy (the kubelet's
// cgroup root must exist); under cgroup v1 each new cpuset inherits its
// parent's CPUs and memory nodes.
func makeCgroup(rel string) error {
	var hier []string
	if CgroupVersion() == "v2" {
		hier = []string{"/sys/fs/cgroup"}
	} else {
		ents, _ := os.ReadDir("/sys/fs/cgroup")
		for _, e := range ents {
			if fi, err := os.Lstat(filepath.Join("/sys/fs/cgroup", e.Name())); err == nil && fi.IsDir() {
				hier = append(hier, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	for _, h := range hier {
		cur := h
		for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
			parent := cur
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("cannot create the cgroup %s: %w", cur, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if cb, _ := os.ReadFile(filepath.Join(cur, f)); len(strings.TrimSpace(string(cb))) == 0 {
						_ = os.WriteFile(filepath.Join(cur, f), b, 0o644)
					}
				}
			}
		}
	}
	return nil
}
