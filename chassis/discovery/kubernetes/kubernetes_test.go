package kubernetes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chf-testbed/testbed/chassis/discovery"
)

const ns = "chf"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func ptr[T any](v T) *T { return &v }

type epSpec struct {
	ip                          string
	ready, serving, terminating *bool
	pod                         string
}

func ready(ip, pod string) epSpec { return epSpec{ip: ip, pod: pod} }

func slice(name, svc string, port int32, eps ...epSpec) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating},
		}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// harness runs a Source against a fake clientset and collects its updates.
type harness struct {
	t       *testing.T
	client  *fake.Clientset
	src     *Source
	updates chan []string
	cancel  context.CancelFunc
	done    chan error
}

func newHarness(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, client: fake.NewClientset(objs...), updates: make(chan []string, 64), done: make(chan error, 1)}
	cfg.Client, cfg.Namespace, cfg.Logger = h.client, ns, quiet
	if cfg.Service == "" {
		cfg.Service = "ocp"
	}
	return h.start(cfg)
}

func (h *harness) start(cfg Config) *harness {
	h.t.Helper()
	src, err := New(cfg)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	h.src = src
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.done <- src.Run(ctx, func(eps []discovery.Endpoint) {
			addrs := make([]string, len(eps))
			for i, e := range eps {
				addrs[i] = e.Addr
			}
			h.updates <- addrs
		})
	}()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			h.t.Errorf("Run did not return after cancel")
		}
	})
	return h
}

// want waits for an update equal to addrs (other updates may come first).
func (h *harness) want(addrs ...string) {
	h.t.Helper()
	if addrs == nil {
		addrs = []string{}
	}
	timeout := time.After(5 * time.Second)
	var last []string
	for {
		select {
		case got := <-h.updates:
			if slices.Equal(got, addrs) {
				return
			}
			last = got
		case <-timeout:
			h.t.Fatalf("endpoint set not %v within 5s; last update %v", addrs, last)
		}
	}
}

// quiet checks no update arrives for a while.
func (h *harness) noUpdate(d time.Duration) {
	h.t.Helper()
	select {
	case got := <-h.updates:
		h.t.Fatalf("unexpected update %v", got)
	case <-time.After(d):
	}
}

func (h *harness) apply(objs ...runtime.Object) {
	h.t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *discoveryv1.EndpointSlice:
			_, err = h.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, o, metav1.UpdateOptions{})
			if err != nil && strings.Contains(err.Error(), "not found") {
				_, err = h.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, o, metav1.CreateOptions{})
			}
		case *corev1.Pod:
			_, err = h.client.CoreV1().Pods(ns).Update(ctx, o, metav1.UpdateOptions{})
			if err != nil && strings.Contains(err.Error(), "not found") {
				_, err = h.client.CoreV1().Pods(ns).Create(ctx, o, metav1.CreateOptions{})
			}
		}
		if err != nil {
			h.t.Fatalf("apply %T: %v", o, err)
		}
	}
}

func (h *harness) deleteSlice(name string) {
	h.t.Helper()
	if err := h.client.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete slice %s: %v", name, err)
	}
}

func TestScaleUpAndDown(t *testing.T) {
	h := newHarness(t, Config{Port: "http"}, slice("ocp-1", "ocp", 8081, ready("10.0.0.1", ""), ready("10.0.0.2", "")))
	h.want("10.0.0.1:8081", "10.0.0.2:8081")
	h.apply(slice("ocp-1", "ocp", 8081, ready("10.0.0.1", ""), ready("10.0.0.2", ""), ready("10.0.0.3", "")))
	h.want("10.0.0.1:8081", "10.0.0.2:8081", "10.0.0.3:8081")
	h.apply(slice("ocp-1", "ocp", 8081, ready("10.0.0.3", "")))
	h.want("10.0.0.3:8081")
	h.deleteSlice("ocp-1")
	h.want()
}

func TestTerminatingPod(t *testing.T) {
	term := epSpec{ip: "10.0.0.2", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}
	gone := epSpec{ip: "10.0.0.3", ready: ptr(false), serving: ptr(false), terminating: ptr(true)}
	h := newHarness(t, Config{}, slice("ocp-1", "ocp", 8081, ready("10.0.0.1", ""), term, gone))
	// A ready endpoint exists: the terminating ones are not used.
	h.want("10.0.0.1:8081")
	// No ready endpoint left: fall back to serving-and-terminating.
	h.apply(slice("ocp-1", "ocp", 8081, term, gone))
	h.want("10.0.0.2:8081")
	// Not serving any more either: nothing.
	h.apply(slice("ocp-1", "ocp", 8081, epSpec{ip: "10.0.0.2", ready: ptr(false), serving: ptr(false), terminating: ptr(true)}))
	h.want()
	// A not-ready (starting) endpoint is not used.
	h.apply(slice("ocp-1", "ocp", 8081, epSpec{ip: "10.0.0.4", ready: ptr(false)}, ready("10.0.0.5", "")))
	h.want("10.0.0.5:8081")
}

func TestTwoSlicesAndDuplicates(t *testing.T) {
	other := slice("abm-1", "abm", 8082, ready("10.0.9.9", ""))
	v6 := slice("ocp-v6", "ocp", 8081, ready("fd00::1", ""))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	h := newHarness(t, Config{Port: "8081"},
		slice("ocp-a", "ocp", 8081, ready("10.0.0.1", ""), ready("10.0.0.2", "")),
		slice("ocp-b", "ocp", 8081, ready("10.0.0.3", ""), ready("10.0.0.1", "")), // duplicate 10.0.0.1
		other, v6)
	h.want("10.0.0.1:8081", "10.0.0.2:8081", "10.0.0.3:8081")
	h.deleteSlice("ocp-a")
	h.want("10.0.0.1:8081", "10.0.0.3:8081")
	// A change to another service's slice does not produce an update.
	h.apply(slice("abm-1", "abm", 8082, ready("10.0.9.8", "")))
	h.noUpdate(200 * time.Millisecond)
}

func TestPortSelection(t *testing.T) {
	s := slice("ocp-a", "ocp", 8081, ready("10.0.0.1", ""))
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr("metrics"), Port: ptr(int32(9090))})
	h := newHarness(t, Config{Port: "metrics"}, s)
	h.want("10.0.0.1:9090")
}

// TestAPIErrorsKeepLastSet makes list and watch fail after the first sync:
// no update is delivered (the last set stays in use), the source reports
// itself failing, and recovers when the API server answers again.
func TestAPIErrorsKeepLastSet(t *testing.T) {
	client := fake.NewClientset(slice("ocp-1", "ocp", 8081, ready("10.0.0.1", ""), ready("10.0.0.2", "")))
	var failing atomic.Bool
	var mu sync.Mutex
	var current watch.Interface
	boom := errors.New("apiserver unavailable")
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, boom
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("endpointslices", func(action k8stesting.Action) (bool, watch.Interface, error) {
		if failing.Load() {
			return true, nil, boom
		}
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		mu.Lock()
		current = w
		mu.Unlock()
		return true, w, err
	})
	h := &harness{t: t, client: client, updates: make(chan []string, 64), done: make(chan error, 1)}
	h.start(Config{Client: client, Namespace: ns, Service: "ocp", Logger: quiet})
	h.want("10.0.0.1:8081", "10.0.0.2:8081")
	if hl := h.src.Health(); hl.Failing || hl.LastSuccess.IsZero() {
		t.Fatalf("health after sync = %+v", hl)
	}

	failing.Store(true)
	mu.Lock()
	current.Stop() // the watch ends; re-watch and re-list now fail
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !h.src.Health().Failing {
		if time.Now().After(deadline) {
			t.Fatalf("source not reported failing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.src.Health().Err; !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Errorf("health error = %v", err)
	}
	h.noUpdate(100 * time.Millisecond) // last set kept

	failing.Store(false)
	for h.src.Health().Failing {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("source did not recover")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNetworkStatus(t *testing.T) {
	const status = `[
	  {"name": "k8s-pod-network", "ips": ["10.244.1.5"], "default": true},
	  {"name": "chf/sriov-a", "interface": "net1", "ips": ["192.168.10.5", "fd10::5"], "mac": "ce:11:22:33:44:55", "dns": {}}
	]`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ocp-0", Namespace: ns, Annotations: map[string]string{NetworkStatusAnnotation: status}}}
	for _, tc := range []struct {
		network, want string
		wantErr       bool
	}{
		{"sriov-a", "192.168.10.5", false},
		{"chf/sriov-a", "192.168.10.5", false},
		{"k8s-pod-network", "10.244.1.5", false},
		{"sriov-b", "", true},
		{"other/sriov-a", "", true},
	} {
		got, err := NetworkAddress(pod, tc.network)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NetworkAddress(%q) = %q, %v; want %q (error %v)", tc.network, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := ParseNetworkStatus(`{"not": "a list"}`); err == nil {
		t.Errorf("ParseNetworkStatus accepted an object")
	}
	bare := pod.DeepCopy()
	bare.Annotations = nil
	if _, err := NetworkAddress(bare, "sriov-a"); !errors.Is(err, ErrNoNetworkAddress) {
		t.Errorf("NetworkAddress without annotation err = %v", err)
	}
}

func podWithNet(name, ip string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "ocp"}},
		Status: corev1.PodStatus{PodIP: "10.244.0." + ip[len(ip)-1:],
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if ip != "" {
		p.Annotations = map[string]string{NetworkStatusAnnotation: `[{"name":"k8s-pod-network","ips":["` + p.Status.PodIP + `"],"default":true},{"name":"chf/sriov-a","interface":"net1","ips":["` + ip + `"]}]`}
	}
	return p
}

// TestMultusNetworkViaTargetRef uses the pods' SR-IOV addresses instead of
// the slice's pod IPs, following pod annotation changes.
func TestMultusNetworkViaTargetRef(t *testing.T) {
	noNet := podWithNet("ocp-2", "192.168.10.2")
	noNet.Annotations = nil
	h := newHarness(t, Config{Network: "sriov-a"},
		slice("ocp-1", "ocp", 8081, ready("10.244.0.1", "ocp-1"), ready("10.244.0.2", "ocp-2"), ready("10.244.0.3", "")),
		podWithNet("ocp-1", "192.168.10.1"), noNet)
	// ocp-2 has no network-status yet and the third endpoint no targetRef.
	h.want("192.168.10.1:8081")
	h.apply(podWithNet("ocp-2", "192.168.10.2"))
	h.want("192.168.10.1:8081", "192.168.10.2:8081")
}

// TestSelectorPods finds pods through the service's selector when slices
// carry no targetRef for them.
func TestSelectorPods(t *testing.T) {
	notReady := podWithNet("ocp-3", "192.168.10.3")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	h := newHarness(t, Config{Network: "sriov-a", PodSelector: "app=ocp", Port: "8081"},
		podWithNet("ocp-1", "192.168.10.1"), podWithNet("ocp-2", "192.168.10.2"), notReady)
	h.want("192.168.10.1:8081", "192.168.10.2:8081")
}

func TestNewErrors(t *testing.T) {
	client := fake.NewClientset()
	for _, cfg := range []Config{
		{Namespace: ns, Service: "ocp"},
		{Client: client, Service: "ocp"},
		{Client: client, Namespace: ns},
		{Client: client, Namespace: ns, Service: "ocp", PodSelector: "app in ("},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
