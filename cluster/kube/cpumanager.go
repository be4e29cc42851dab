package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// SharedCPUs is node n's shared CPU pool as its kubelet's static CPU
// manager keeps it (<root-dir>/cpu_manager_state, defaultCpuSet): the
// CPUs no Guaranteed pod holds exclusively, in the cpuset list format
// taskset -c takes. A process started on the node from outside a pod (the
// knee sweep's load generator) is kept there so that it does not run on a
// pinned pod's CPU.
func SharedCPUs(n NodeState) (string, error) {
	p := filepath.Join(n.Dir, "kubelet", "cpu_manager_state")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("cannot read the CPU manager's state: %w", err)
	}
	var st struct {
		Policy     string `json:"policyName"`
		DefaultSet string `json:"defaultCpuSet"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("cannot decode %s: %w", p, err)
	}
	if st.Policy != "static" || st.DefaultSet == "" {
		return "", fmt.Errorf("%s: policy %q, shared pool %q: not the static policy's", p, st.Policy, st.DefaultSet)
	}
	return st.DefaultSet, nil
}
