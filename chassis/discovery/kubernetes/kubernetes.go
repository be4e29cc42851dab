// Package kubernetes discovers the endpoints of a Service from its
// EndpointSlices, watched with client-go shared informers, optionally using
// each pod's address on a Multus secondary network (SR-IOV VF) read from the
// k8s.v1.cni.cncf.io/network-status annotation.
//
// Informer handlers only signal a change; one worker goroutine rebuilds the
// whole endpoint set from the listers and delivers it when it differs from
// the last one. Endpoint conditions follow kube-proxy: an endpoint is used
// when ready (a nil ready condition means ready); when no endpoint of the
// service is ready, serving-and-terminating endpoints are used instead.
//
// This is the only package of the project that imports client-go. It
// registers the "kubernetes" discovery mode when imported, so that only
// the binaries offering that mode (chf, for cgw and ocp) import it and
// link client-go; loadgen does not.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chf-testbed/testbed/chassis/discovery"
)

// NetworkStatusAnnotation is the Multus annotation listing a pod's
// addresses on each attached network.
const NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"

// ErrNoNamespace is returned when neither the config nor the environment
// gives a namespace.
var ErrNoNamespace = errors.New("kubernetes: namespace not set (--k8s-namespace or POD_NAMESPACE)")

// Config configures a Source.
type Config struct {
	// Client talks to the API server (tests pass a fake clientset).
	Client kubernetes.Interface
	// Namespace and Service name the peer service.
	Namespace string
	Service   string
	// Port is the service port's name or number; empty means the slice's
	// only port (or its first one).
	Port string
	// Network is the Multus network (name or namespace/name) whose pod
	// addresses are used instead of the EndpointSlice addresses; empty means
	// the EndpointSlice addresses (pod IPs).
	Network string
	// PodSelector selects the service's pods by label (the service's
	// selector) for endpoints without a targetRef; optional.
	PodSelector string
	// AddressType of the slices used (default IPv4).
	AddressType discoveryv1.AddressType
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Source is a discovery.Source over EndpointSlices. It implements
// discovery.HealthReporter: a failing list or watch keeps the last set in
// use and marks the source failing until the API server answers again.
type Source struct {
	discovery.HealthState
	cfg      Config
	selector labels.Selector
	kick     chan struct{}
}

// New returns a Source for cfg.
func New(cfg Config) (*Source, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes: Config.Client is nil")
	}
	if cfg.Namespace == "" {
		return nil, ErrNoNamespace
	}
	if cfg.Service == "" {
		return nil, errors.New("kubernetes: Config.Service is empty")
	}
	if cfg.AddressType == "" {
		cfg.AddressType = discoveryv1.AddressTypeIPv4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("namespace", cfg.Namespace, "service", cfg.Service)
	s := &Source{cfg: cfg, kick: make(chan struct{}, 1)}
	if cfg.PodSelector != "" {
		sel, err := labels.Parse(cfg.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("cannot parse pod selector %q: %w", cfg.PodSelector, err)
		}
		s.selector = sel
	}
	return s, nil
}

// Mode is the --discovery mode this package registers with
// chassis/discovery: importing the package (blank import) is what makes
// it available, and what links client-go into a binary.
const Mode = "kubernetes"

func init() {
	discovery.Register(Mode, func(peer string, o discovery.Options) (discovery.Source, error) {
		src, err := PeerSource(o.Namespace, peer, o.Network)
		if err != nil {
			return nil, fmt.Errorf("cannot build Kubernetes discovery for %s: %w", peer, err)
		}
		return src, nil
	})
}

// PeerSource builds a Source for peer ("service[:port]") in namespace with
// the in-cluster configuration (or $KUBECONFIG outside a cluster). network
// selects a Multus network ("" = pod IPs).
func PeerSource(namespace, peer, network string) (*Source, error) {
	if namespace == "" {
		namespace = os.Getenv("POD_NAMESPACE")
	}
	svc, port := peer, ""
	if i := strings.LastIndexByte(peer, ':'); i >= 0 {
		svc, port = peer[:i], peer[i+1:]
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		kc := os.Getenv("KUBECONFIG")
		if kc == "" {
			return nil, fmt.Errorf("cannot configure Kubernetes client (not in a cluster and KUBECONFIG unset): %w", err)
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			return nil, fmt.Errorf("cannot load kubeconfig %s: %w", kc, err)
		}
	}
	cfg.UserAgent = "chf-chassis"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	return New(Config{Client: client, Namespace: namespace, Service: svc, Port: port, Network: network})
}

func (s *Source) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// handler enqueues a rebuild on any change; an event coming from the API
// server also proves it reachable again.
func (s *Source) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.signal() },
		UpdateFunc: func(any, any) { s.signal() },
		DeleteFunc: func(any) { s.signal() },
	}
}

// Run watches the service's EndpointSlices (and pods, for a network or a
// selector) and delivers the endpoint set on every change until ctx ends.
func (s *Source) Run(ctx context.Context, update func([]discovery.Endpoint)) error {
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	sliceInf := discoveryinformers.NewFilteredEndpointSliceInformer(s.cfg.Client, s.cfg.Namespace, 0, indexers,
		func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + s.cfg.Service
		})
	infs := []cache.SharedIndexInformer{sliceInf}
	sliceLister := discoverylisters.NewEndpointSliceLister(sliceInf.GetIndexer())
	var pods listersv1.PodLister
	if s.cfg.Network != "" || s.selector != nil {
		podInf := coreinformers.NewFilteredPodInformer(s.cfg.Client, s.cfg.Namespace, 0, indexers,
			func(o *metav1.ListOptions) {
				if s.selector != nil && s.cfg.Network == "" {
					o.LabelSelector = s.selector.String()
				}
			})
		infs = append(infs, podInf)
		pods = listersv1.NewPodLister(podInf.GetIndexer())
	}
	var synced []cache.InformerSynced
	for _, inf := range infs {
		if err := s.watchErrors(inf); err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(s.handler()); err != nil {
			return fmt.Errorf("cannot add informer handler: %w", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	ictx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, inf := range infs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ictx)
		}()
	}
	if !cache.WaitForCacheSync(ictx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot sync informers of service %s/%s", s.cfg.Namespace, s.cfg.Service)
	}
	var last []discovery.Endpoint
	delivered := false
	s.signal()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		}
		eps, err := s.build(sliceLister, pods)
		if err != nil {
			s.cfg.Logger.Warn("cannot build endpoint set; keeping the last one", "err", err)
			continue
		}
		s.Report(nil, time.Now())
		if delivered && discovery.Equal(eps, last) {
			continue
		}
		last, delivered = eps, true
		s.cfg.Logger.Info("endpoints changed", "count", len(eps))
		update(slices.Clone(eps))
	}
}

// watchErrors marks the source failing on list/watch errors; informers
// retry with back-off on their own and keep their caches meanwhile.
func (s *Source) watchErrors(inf cache.SharedIndexInformer) error {
	err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.Report(err, time.Now())
		s.cfg.Logger.Warn("Kubernetes list/watch failed; keeping the last endpoint set", "err", err)
	})
	if err != nil {
		return fmt.Errorf("cannot set watch error handler: %w", err)
	}
	return nil
}

type candidate struct {
	addr        string
	ready       bool
	servingTerm bool // serving and terminating
}

// build computes the endpoint set from the listers.
func (s *Source) build(sl discoverylisters.EndpointSliceLister, pods listersv1.PodLister) ([]discovery.Endpoint, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: s.cfg.Service})
	all, err := sl.EndpointSlices(s.cfg.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("cannot list EndpointSlices: %w", err)
	}
	var cands []candidate
	for _, slice := range all {
		if slice.AddressType != s.cfg.AddressType {
			continue
		}
		port, ok := s.slicePort(slice)
		if !ok {
			continue
		}
		for _, ep := range slice.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			c := conditions(ep.Conditions)
			if !c.ready && !c.servingTerm {
				continue
			}
			host := ep.Addresses[0]
			if s.cfg.Network != "" {
				if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || pods == nil {
					continue
				}
				pod, err := pods.Pods(s.cfg.Namespace).Get(ep.TargetRef.Name)
				if err != nil {
					continue // pod not (yet) in the cache
				}
				ip, err := NetworkAddress(pod, s.cfg.Network)
				if err != nil {
					s.cfg.Logger.Debug("endpoint skipped", "pod", pod.Name, "err", err)
					continue
				}
				host = ip
			}
			c.addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
			cands = append(cands, c)
		}
	}
	if s.selector != nil && pods != nil {
		cands = append(cands, s.selectorCandidates(pods, cands)...)
	}
	return choose(cands), nil
}

// selectorCandidates adds pods matched by the service's selector that no
// slice lists (for example slices written without targetRefs).
func (s *Source) selectorCandidates(pods listersv1.PodLister, have []candidate) []candidate {
	port, err := strconv.Atoi(s.cfg.Port)
	if err != nil {
		return nil // a named port cannot be resolved without a slice
	}
	list, err := pods.Pods(s.cfg.Namespace).List(s.selector)
	if err != nil {
		return nil
	}
	var out []candidate
	for _, pod := range list {
		host := pod.Status.PodIP
		if s.cfg.Network != "" {
			ip, err := NetworkAddress(pod, s.cfg.Network)
			if err != nil {
				continue
			}
			host = ip
		}
		if host == "" {
			continue
		}
		ready := podReady(pod)
		c := candidate{addr: net.JoinHostPort(host, strconv.Itoa(port))}
		if pod.DeletionTimestamp == nil {
			c.ready = ready
		} else {
			c.servingTerm = ready
		}
		if (c.ready || c.servingTerm) && !slices.ContainsFunc(have, func(h candidate) bool { return h.addr == c.addr }) {
			out = append(out, c)
		}
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// conditions applies kube-proxy's reading of endpoint conditions.
func conditions(c discoveryv1.EndpointConditions) candidate {
	ready := c.Ready == nil || *c.Ready
	serving := ready
	if c.Serving != nil {
		serving = *c.Serving
	}
	terminating := c.Terminating != nil && *c.Terminating
	return candidate{ready: ready, servingTerm: serving && terminating}
}

// choose returns the ready endpoints, or the serving-and-terminating ones
// when none is ready, sorted and de-duplicated.
func choose(cands []candidate) []discovery.Endpoint {
	var ready, fallback []discovery.Endpoint
	for _, c := range cands {
		switch {
		case c.ready:
			ready = append(ready, discovery.Endpoint{Addr: c.addr})
		case c.servingTerm:
			fallback = append(fallback, discovery.Endpoint{Addr: c.addr})
		}
	}
	if len(ready) == 0 {
		ready = fallback
	}
	if ready == nil {
		ready = []discovery.Endpoint{}
	}
	return discovery.Dedup(ready)
}

// slicePort returns the port of the slice matching cfg.Port.
func (s *Source) slicePort(slice *discoveryv1.EndpointSlice) (int32, bool) {
	for i, p := range slice.Ports {
		if p.Port == nil {
			continue
		}
		switch {
		case s.cfg.Port == "":
			if i == 0 {
				return *p.Port, true
			}
		case p.Name != nil && *p.Name == s.cfg.Port:
			return *p.Port, true
		case strconv.Itoa(int(*p.Port)) == s.cfg.Port:
			return *p.Port, true
		}
	}
	return 0, false
}

// NetworkStatus is one entry of the Multus network-status annotation.
type NetworkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	Default   bool     `json:"default"`
}

// ErrNoNetworkAddress is returned when a pod has no address on the network.
var ErrNoNetworkAddress = errors.New("kubernetes: pod has no address on the network")

// NetworkAddress returns pod's first address on network (a Multus network
// name, "name" or "namespace/name"; "name" also matches "<pod
// namespace>/name") from its network-status annotation.
func NetworkAddress(pod *corev1.Pod, network string) (string, error) {
	raw, ok := pod.Annotations[NetworkStatusAnnotation]
	if !ok {
		return "", fmt.Errorf("pod %s: %w %q (no %s annotation)", pod.Name, ErrNoNetworkAddress, network, NetworkStatusAnnotation)
	}
	sts, err := ParseNetworkStatus(raw)
	if err != nil {
		return "", fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	for _, st := range sts {
		if !networkMatches(st.Name, network, pod.Namespace) {
			continue
		}
		for _, ip := range st.IPs {
			if net.ParseIP(ip) != nil {
				return ip, nil
			}
		}
	}
	return "", fmt.Errorf("pod %s: %w %q", pod.Name, ErrNoNetworkAddress, network)
}

func networkMatches(name, want, podNamespace string) bool {
	if name == want {
		return true
	}
	if !strings.Contains(want, "/") {
		return name == podNamespace+"/"+want || name == "default/"+want
	}
	return false
}

// ParseNetworkStatus decodes a network-status annotation value.
func ParseNetworkStatus(raw string) ([]NetworkStatus, error) {
	var sts []NetworkStatus
	if err := json.Unmarshal([]byte(raw), &sts); err != nil {
		return nil, fmt.Errorf("cannot parse %s annotation: %w", NetworkStatusAnnotation, err)
	}
	return sts, nil
}
