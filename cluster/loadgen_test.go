package cluster

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// testLoadgen installs the loadgen chart and checks that the real Job
// controller creates one pod per shard, each with its completion index
// (which the kubelet substitutes into --shard $(JOB_COMPLETION_INDEX)/n).
func testLoadgen(t *testing.T, cp *controlPlane) {
	c := cp.client
	const ns = "loadgen"
	createNamespace(t, c, ns, "restricted")
	chart := filepath.Join(repoRoot(), "charts", "loadgen")
	if out, err := helm(t, cp, "install", "loadgen", chart, "-n", ns, "--set", "shards=3", "--timeout", "60s"); err != nil {
		t.Fatalf("helm install loadgen: %v\n%s", err, out)
	}
	jobs, err := c.BatchV1().Jobs(ns).List(ctxT(t), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("loadgen jobs: %d (err %v), want 1", len(jobs.Items), err)
	}
	job := jobs.Items[0]
	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("job completionMode %v, want Indexed", job.Spec.CompletionMode)
	}
	var pods []corev1.Pod
	waitFor(t, "3 shard pods", 60*time.Second, func() error {
		list, err := c.CoreV1().Pods(ns).List(ctxT(t), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
		if err != nil {
			return err
		}
		if len(list.Items) != 3 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		pods = list.Items
		return nil
	})
	var idx []string
	for _, p := range pods {
		i := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		idx = append(idx, i)
		ctr := p.Spec.Containers[0]
		args := strings.Join(ctr.Args, " ")
		if !strings.Contains(args, "--shard $(JOB_COMPLETION_INDEX)/3") {
			t.Errorf("pod %s args %q lack --shard $(JOB_COMPLETION_INDEX)/3", p.Name, args)
		}
		found := false
		for _, e := range ctr.Env {
			if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
				found = true
			}
		}
		if !found {
			t.Errorf("pod %s has no JOB_COMPLETION_INDEX from the completion-index annotation", p.Name)
		}
		expanded := strings.ReplaceAll(args, "$(JOB_COMPLETION_INDEX)", i)
		t.Logf("pod %s: --shard %s/3 (%s)", p.Name, i, firstShard(expanded))
	}
	sort.Strings(idx)
	if !slices.Equal(idx, []string{"0", "1", "2"}) {
		t.Errorf("completion indexes %v, want [0 1 2]", idx)
	}
}

func firstShard(args string) string {
	f := strings.Fields(args)
	for i, a := range f {
		if a == "--shard" && i+1 < len(f) {
			return "--shard " + f[i+1]
		}
	}
	return ""
}

// testProvision checks the documented way to provision separately from an
// install done with provision.enabled=false: render the Job with helm
// template and create it; the Job controller creates its pod in a
// restricted namespace.
func testProvision(t *testing.T, cp *controlPlane) {
	c := cp.client
	const ns = "chf-calico"
	out, err := helm(t, cp, "template", "chf", filepath.Join(repoRoot(), "charts", "chf"), "-n", ns,
		"--validate", "--show-only", "templates/provision-job.yaml")
	if err != nil {
		t.Fatalf("helm template provision job: %v\n%s", err, out)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(out), &job); err != nil {
		t.Fatalf("cannot decode the provision Job: %v\n%s", err, out)
	}
	if _, err := c.BatchV1().Jobs(ns).Create(ctxT(t), &job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create the provision Job: %v", err)
	}
	waitFor(t, "provision pod", 60*time.Second, func() error {
		list, err := c.CoreV1().Pods(ns).List(ctxT(t), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no pod")
		}
		return nil
	})
}
