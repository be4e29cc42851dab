package cluster

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cluster/kube"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// controlPlane is etcd, kube-apiserver and kube-controller-manager running
// on loopback for one test binary.
type controlPlane struct {
	dir        string
	kubeconfig string // admin (system:masters)
	cfg        *rest.Config
	client     *kubernetes.Clientset

	mu    sync.Mutex
	procs []*exec.Cmd
}

// binDir is where cluster/build.sh put the binaries (set by make cluster-test).
func binDir(t *testing.T) string {
	d := os.Getenv("CHF_CONTROLPLANE_BIN")
	if d == "" {
		t.Skip("CHF_CONTROLPLANE_BIN not set: the control-plane test runs under `make cluster-test`, which builds etcd, kube-apiserver and kube-controller-manager (cluster/build.sh)")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("cannot find %s in CHF_CONTROLPLANE_BIN: %v (run cluster/build.sh)", b, err)
		}
	}
	return d
}

// startControlPlane starts the three processes, each waited for with a
// deadline; everything stops at the end of the test, on a failure, or on
// SIGINT/SIGTERM (and, through Pdeathsig, if the test binary dies).
func startControlPlane(t *testing.T) *controlPlane {
	bin := binDir(t)
	cp := &controlPlane{dir: t.TempDir()}
	t.Cleanup(cp.stop)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			cp.stop()
			fmt.Fprintf(os.Stderr, "cluster: %v: control plane stopped\n", s)
			os.Exit(1)
		case <-done:
		}
	}()
	t.Cleanup(func() { signal.Stop(sig); close(done) })

	pki := newPKI(t, cp.dir)
	ports, err := kube.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	etcdPort, peerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.run(t, filepath.Join(bin, "etcd"), "etcd", kube.EtcdArgs("cluster-test", filepath.Join(cp.dir, "etcd"), etcdURL, peerURL)...)
	waitFor(t, "etcd /health", 30*time.Second, func() error { return kube.EtcdHealthy(etcdURL) })

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.run(t, filepath.Join(bin, "kube-apiserver"), "kube-apiserver",
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--etcd-servers="+etcdURL,
		"--tls-cert-file="+pki.File("apiserver.crt"), "--tls-private-key-file="+pki.File("apiserver.key"),
		"--client-ca-file="+pki.File("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki.File("sa.pub"), "--service-account-signing-key-file="+pki.File("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none", "--v=0")
	cp.kubeconfig = kubeconfig(t, pki, "admin", server)
	cfg := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{
		CAFile: pki.File("ca.crt"), CertFile: pki.File("admin.crt"), KeyFile: pki.File("admin.key")},
		QPS: 100, Burst: 200, Timeout: 30 * time.Second}
	cp.cfg = cfg
	if cp.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatalf("cannot create client: %v", err)
	}
	waitFor(t, "kube-apiserver /readyz", 90*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cp.client.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})

	kcm := kubeconfig(t, pki, "kcm", server)
	cp.run(t, filepath.Join(bin, "kube-controller-manager"), "kube-controller-manager",
		"--kubeconfig="+kcm, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--service-account-private-key-file="+pki.File("sa.key"), "--root-ca-file="+pki.File("ca.crt"),
		"--use-service-account-credentials=true", "--service-cluster-ip-range=10.0.0.0/24",
		"--leader-elect=false", "--v=0",
		// Nothing renews the Node's heartbeat: the node lifecycle
		// controller would mark it NotReady and its pods not ready.
		"--controllers=*,-node-lifecycle-controller")
	// The ServiceAccount controller creating "default" proves the
	// controllers run (and pods need it to be admitted).
	waitFor(t, "kube-controller-manager (default ServiceAccount)", 90*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cp.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", getOpts)
		return err
	})
	return cp
}

// run starts one process, its output in <dir>/<name>.log (printed on failure).
func (cp *controlPlane) run(t *testing.T, path, name string, args ...string) {
	t.Helper()
	logPath := filepath.Join(cp.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("cannot create %s: %v", logPath, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", name, err)
	}
	f.Close()
	cp.mu.Lock()
	cp.procs = append(cp.procs, cmd)
	cp.mu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("%s log tail:\n%s", name, b)
		}
	})
}

// stop ends the processes in reverse order (SIGTERM, then SIGKILL after 5 s).
func (cp *controlPlane) stop() {
	cp.mu.Lock()
	procs := cp.procs
	cp.procs = nil
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _ = p.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-exited
		}
	}
}

// rssMB returns each control-plane process's resident set and its peak
// (VmRSS, VmHWM) in MB.
func (cp *controlPlane) rssMB() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[string]int{}
	for _, p := range cp.procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Process.Pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
				kb, _ := strconv.Atoi(f[1])
				key := filepath.Base(p.Path)
				if f[0] == "VmHWM:" {
					key += "(peak)"
				}
				out[key] = kb / 1024
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready after %v: %v", what, d, err)
}

// newPKI makes the test's certificates with the cluster's PKI (kube.PKI):
// the API server's serving certificate for loopback, the admin's and the
// controller manager's client certificates.
func newPKI(t *testing.T, dir string) *kube.PKI {
	t.Helper()
	p, err := kube.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		subj pkix.Name
		ips  []net.IP
		dns  []string
	}{
		{"apiserver", pkix.Name{CommonName: "kube-apiserver"}, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, kube.APIServerNames},
		{"admin", pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, nil, nil},
		{"kcm", pkix.Name{CommonName: "system:kube-controller-manager"}, nil, nil},
	} {
		if err := p.Issue(c.name, c.subj, c.ips, c.dns); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func kubeconfig(t *testing.T, p *kube.PKI, user, server string) string {
	t.Helper()
	path, err := p.Kubeconfig(user, server)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

var errNotYet = errors.New("not yet")
