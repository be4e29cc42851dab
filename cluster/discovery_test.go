package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/chf-testbed/testbed/chassis/discovery"
	k8sdisc "github.com/chf-testbed/testbed/chassis/discovery/kubernetes"
)

const nodeName = "node-1"

// kubelet stands in for the kubelet (and the scheduler): it binds pods to
// the Node and writes their status as a kubelet would.
type kubelet struct {
	c      kubernetes.Interface
	mu     sync.Mutex
	nextIP int
}

var theKubelet struct {
	once sync.Once
	k    *kubelet
	err  error
}

func getKubelet(t *testing.T, c kubernetes.Interface) *kubelet {
	t.Helper()
	theKubelet.once.Do(func() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
			"kubernetes.io/hostname": nodeName, "topology.kubernetes.io/zone": "zone-a"}}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			theKubelet.err = err
			return
		}
		// The controller manager writes the new Node too (its pod CIDR,
		// taints): a status write on the object Create returned can meet
		// a newer version, so read it again on a conflict.
		theKubelet.err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.1"}}
			_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		theKubelet.k = &kubelet{c: c, nextIP: 10}
	})
	if theKubelet.err != nil {
		t.Fatalf("cannot create the Node: %v", theKubelet.err)
	}
	return theKubelet.k
}

func (k *kubelet) ip() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nextIP++
	return fmt.Sprintf("10.244.%d.%d", k.nextIP/250, k.nextIP%250+1)
}

// start binds the pod if needed and reports it Running with an IP and the
// given readiness; it returns the time of the status write.
func (k *kubelet) start(t *testing.T, ns, name string, ready bool) (string, time.Time) {
	t.Helper()
	ctx := ctxT(t)
	pod, err := k.c.CoreV1().Pods(ns).Get(ctx, name, getOpts)
	if err != nil {
		t.Fatalf("cannot get pod %s: %v", name, err)
	}
	if pod.Spec.NodeName == "" {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}
		if err := k.c.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot bind pod %s: %v", name, err)
		}
		if pod, err = k.c.CoreV1().Pods(ns).Get(ctx, name, getOpts); err != nil {
			t.Fatalf("cannot get pod %s: %v", name, err)
		}
	}
	ip := pod.Status.PodIP
	if ip == "" {
		ip = k.ip()
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.HostIP, pod.Status.HostIPs = "10.99.0.1", []corev1.HostIP{{IP: "10.99.0.1"}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
	}
	at := time.Now()
	if _, err := k.c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot update status of pod %s: %v", name, err)
	}
	return ip, at
}

// watcher records the endpoint sets the discovery source delivers.
type watcher struct {
	mu   sync.Mutex
	cur  []string
	kick chan struct{}
}

func (w *watcher) update(eps []discovery.Endpoint) {
	set := make([]string, 0, len(eps))
	for _, e := range eps {
		set = append(set, e.Addr)
	}
	sort.Strings(set)
	w.mu.Lock()
	w.cur = set
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// waitSet waits until the delivered set equals want (host:port) and
// returns when it saw it.
func (w *watcher) waitSet(t *testing.T, what string, want []string) time.Time {
	t.Helper()
	want = slices.Clone(want)
	sort.Strings(want)
	deadline := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		cur := slices.Clone(w.cur)
		w.mu.Unlock()
		if slices.Equal(cur, want) {
			return time.Now()
		}
		select {
		case <-w.kick:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: discovery has %v, want %v after 30s", what, cur, want)
		}
	}
}

func podsOf(t *testing.T, c kubernetes.Interface, ns, component string) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(ctxT(t), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=chf,app.kubernetes.io/component=" + component})
	if err != nil {
		t.Fatalf("cannot list pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func scale(t *testing.T, c kubernetes.Interface, ns, deploy string, n int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if _, err := c.AppsV1().Deployments(ns).Patch(ctxT(t), deploy, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot scale %s to %d: %v", deploy, n, err)
	}
}

// testDiscovery runs chassis/discovery/kubernetes as the chart's
// ServiceAccount against the slices the real EndpointSlice controller
// builds, through scale up, readiness changes, scale down and termination.
// With network set (SR-IOV), pods carry a Multus network-status annotation
// and the net1 address must be the one discovered.
func testDiscovery(t *testing.T, cp *controlPlane, ns, network string, multus bool) {
	c := cp.client
	k := getKubelet(t, c)
	const comp, deploy = "ocp", "chf-ocp"
	// The HPA would fight the test's scaling (no metrics here).
	if err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctxT(t), deploy, metav1.DeleteOptions{}); err != nil {
		t.Logf("no HPA %s deleted: %v", deploy, err)
	}
	svc, err := c.CoreV1().Services(ns).Get(ctxT(t), deploy, getOpts)
	if err != nil {
		t.Fatalf("cannot get Service %s: %v", deploy, err)
	}
	port := fmt.Sprint(svc.Spec.Ports[0].Port)
	src, err := k8sdisc.New(k8sdisc.Config{Client: impersonate(t, cp, ns, "chf"), Namespace: ns, Service: deploy,
		Port: svc.Spec.Ports[0].Name, Network: network})
	if err != nil {
		t.Fatalf("cannot create discovery source: %v", err)
	}
	w := &watcher{kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- src.Run(ctx, w.update) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("discovery Run: %v", err)
		}
	}()

	addrOf := map[string]string{} // pod -> discovered host:port
	var lat []time.Duration
	// ready makes pod Ready and waits until discovery delivers want.
	bringUp := func(name string) {
		ip, _ := k.start(t, ns, name, false)
		host := ip
		if multus {
			host = annotateNet1(t, c, ns, name, network)
		}
		addrOf[name] = net.JoinHostPort(host, port)
		var want []string
		for _, a := range addrOf {
			want = append(want, a)
		}
		_, at := k.start(t, ns, name, true)
		seen := w.waitSet(t, "ready "+name, want)
		lat = append(lat, seen.Sub(at))
	}
	current := func() []string {
		var out []string
		for _, a := range addrOf {
			out = append(out, a)
		}
		return out
	}
	w.waitSet(t, "initial (no pod ready)", nil)
	for _, p := range podsOf(t, c, ns, comp) {
		bringUp(p.Name)
	}
	// Scale up by 3.
	before := len(addrOf)
	scale(t, c, ns, deploy, int32(before+3))
	waitFor(t, "scale-up pods", 30*time.Second, func() error {
		if n := len(podsOf(t, c, ns, comp)); n != before+3 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	for _, p := range podsOf(t, c, ns, comp) {
		if _, ok := addrOf[p.Name]; !ok {
			bringUp(p.Name)
		}
	}
	// Readiness: one pod not ready, then ready again.
	pods := podsOf(t, c, ns, comp)
	victim := pods[0].Name
	_, at := k.start(t, ns, victim, false)
	keep := addrOf[victim]
	delete(addrOf, victim)
	seen := w.waitSet(t, "not ready "+victim, current())
	t.Logf("not-ready %s gone after %v", victim, seen.Sub(at).Round(time.Millisecond))
	addrOf[victim] = keep
	_, at = k.start(t, ns, victim, true)
	lat = append(lat, w.waitSet(t, "ready again "+victim, current()).Sub(at))

	// Scale down to 1: the ReplicaSet deletes pods gracefully; with no
	// kubelet they stay Terminating (ready=false, serving=true) and
	// discovery drops them while a ready endpoint remains.
	scale(t, c, ns, deploy, 1)
	var terminating []string
	waitFor(t, "scale-down", 30*time.Second, func() error {
		live := podsOf(t, c, ns, comp)
		if len(live) != 1 {
			return fmt.Errorf("%d live pods", len(live))
		}
		terminating = terminating[:0]
		for name := range addrOf {
			if name != live[0].Name {
				terminating = append(terminating, name)
			}
		}
		return nil
	})
	last := podsOf(t, c, ns, comp)[0].Name
	w.waitSet(t, "scale down to 1", []string{addrOf[last]})
	// The kubelet finishes those deletions.
	zero := int64(0)
	for _, name := range terminating {
		if err := c.CoreV1().Pods(ns).Delete(ctxT(t), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatalf("cannot delete pod %s: %v", name, err)
		}
		delete(addrOf, name)
	}
	w.waitSet(t, "terminated pods gone", []string{addrOf[last]})
	// Scale to 0: the last pod is terminating but still serving, so it is
	// kept as the fallback until it is gone.
	scale(t, c, ns, deploy, 0)
	waitFor(t, "scale to 0", 30*time.Second, func() error {
		if n := len(podsOf(t, c, ns, comp)); n != 0 {
			return fmt.Errorf("%d live pods", n)
		}
		return nil
	})
	// The EndpointSlice controller marks the last endpoint terminating
	// asynchronously: wait for it (listing once raced it on a loaded box).
	terminatingServing := 0
	waitFor(t, "the slices list the terminating pod as serving", 30*time.Second, func() error {
		slices0, err := c.DiscoveryV1().EndpointSlices(ns).List(ctxT(t), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + deploy})
		if err != nil {
			return err
		}
		terminatingServing = 0
		for _, s := range slices0.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Terminating != nil && *e.Conditions.Terminating && e.Conditions.Serving != nil && *e.Conditions.Serving {
					terminatingServing++
				}
			}
		}
		if terminatingServing != 1 {
			return fmt.Errorf("%d serving+terminating endpoints, want 1", terminatingServing)
		}
		return nil
	})
	t.Logf("after scale to 0: %d serving+terminating endpoints in the slices", terminatingServing)
	w.waitSet(t, "all terminating: serving fallback", []string{addrOf[last]})
	if err := c.CoreV1().Pods(ns).Delete(ctxT(t), last, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("cannot delete pod %s: %v", last, err)
	}
	w.waitSet(t, "all pods gone", nil)

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%s: Ready -> seen by discovery over %d pods: median %v, max %v", ns, len(lat),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	if lat[len(lat)-1] > 10*time.Second {
		t.Errorf("Ready -> seen max %v exceeds the 10s bound", lat[len(lat)-1])
	}
}

// annotateNet1 writes the Multus network-status annotation (as Multus
// would) with net1 on the SR-IOV network, and returns the net1 address.
func annotateNet1(t *testing.T, c kubernetes.Interface, ns, pod, network string) string {
	t.Helper()
	pp, err := c.CoreV1().Pods(ns).Get(ctxT(t), pod, getOpts)
	if err != nil {
		t.Fatalf("cannot get pod: %v", err)
	}
	net1 := "192.168.100." + strings.Split(pp.Status.PodIP, ".")[3]
	status := []map[string]any{
		{"name": "k8s-pod-network", "interface": "eth0", "ips": []string{pp.Status.PodIP}, "default": true},
		{"name": ns + "/" + network, "interface": "net1", "ips": []string{net1}},
	}
	b, _ := json.Marshal(status)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		k8sdisc.NetworkStatusAnnotation: string(b)}}})
	if _, err := c.CoreV1().Pods(ns).Patch(ctxT(t), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot annotate pod: %v", err)
	}
	return net1
}
