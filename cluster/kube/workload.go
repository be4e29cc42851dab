package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Helm runs helm against the cluster in dir (its own cache, config and
// data directories under dir) with a deadline, returning its output.
func Helm(ctx context.Context, dir, helmBin string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := filepath.Join(dir, "helm")
	cmd := exec.CommandContext(ctx, helmBin, append(args, "--kubeconfig", Kubeconfig(dir))...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+h, "HELM_CONFIG_HOME="+h, "HELM_DATA_HOME="+h)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// WaitJob waits until Job ns/name has completed (every index succeeded),
// failing early when it fails, and at d.
func WaitJob(ctx context.Context, c kubernetes.Interface, ns, name string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, cd := range j.Status.Conditions {
				if cd.Status != corev1.ConditionTrue {
					continue
				}
				switch cd.Type {
				case batchv1.JobComplete:
					return nil
				case batchv1.JobFailed:
					return fmt.Errorf("job %s/%s failed: %s: %s", ns, name, cd.Reason, cd.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s/%s not complete after %v (last error %v)", ns, name, d, err)
		case <-time.After(time.Second):
		}
	}
}

// JobPods lists Job ns/name's pods.
func JobPods(ctx context.Context, c kubernetes.Interface, ns, name string) ([]corev1.Pod, error) {
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Logs returns a container's log (through the API server and the kubelet),
// at most limit bytes.
func Logs(ctx context.Context, c kubernetes.Interface, ns, pod, container string, limit int64) (string, error) {
	r, err := c.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot read the log of %s/%s: %w", ns, pod, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit))
	return string(b), err
}
