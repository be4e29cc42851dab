package difftest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"

	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/abm/aslite"
)

// EnvServer names a running Aerospike server ("host:port", namespace "chf")
// to compare with instead of starting asd.
const EnvServer = "CHF_TEST_AEROSPIKE"

// target is one server under comparison.
type target struct {
	name   string
	client *as.Client
	ns     string
	set    string
}

// step is one operation (or a few tightly bound ones) and its outcome as
// text: result codes, bins, generations, TTL classes, existence.
type step struct {
	name string
	run  func(t *target) string
}

func dial(tb testing.TB, hostport string) *as.Client {
	tb.Helper()
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		tb.Fatal(err)
	}
	cp := as.NewClientPolicy()
	cp.Timeout = 10 * time.Second
	cl, aerr := as.NewClientWithPolicyAndHost(cp, as.NewHost(host, p))
	if aerr != nil {
		tb.Fatalf("cannot connect to %s: %v", hostport, aerr)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// startASD returns the address of the real server to compare with: the one
// named by CHF_TEST_AEROSPIKE, or a one-node asd started here (nsup-period
// nsup as in asd.Options). It skips when there is no binary and fails under
// CI=true when the binary does not start.
func startASD(t *testing.T, nsup int) (hostport string, named bool) {
	t.Helper()
	if hp := os.Getenv(EnvServer); hp != "" {
		return hp, true
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := asd.DefaultBinary(root)
	if errors.Is(err, asd.ErrNoBinary) {
		t.Skipf("no Aerospike server to compare with (set %s or %s): %v", asd.EnvBinary, EnvServer, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := asd.Start(ctx, asd.Options{Binary: bin, Dir: t.TempDir(), NsupPeriod: nsup, DataSize: "512M"})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("asd binary %s present but does not start: %v", bin, err)
		}
		t.Skipf("asd binary %s does not start (fails under CI=true): %v", bin, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cannot stop asd: %v", err)
		}
	})
	return c.Hosts()[0], false
}

func startAslite(t *testing.T, cfg aslite.Config) string {
	t.Helper()
	cfg.Namespaces = []string{"chf"}
	srv, err := aslite.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

// compare runs steps against both targets in turn and reports every
// difference; known lists the steps whose difference is deliberate
// (documented in abm/aslite/README.md) with the reason.
func compare(t *testing.T, real, lite *target, steps []step, known map[string]string) {
	t.Helper()
	diffs, deliberate := 0, 0
	for _, s := range steps {
		a := s.run(real)
		b := s.run(lite)
		if a == b {
			continue
		}
		if why, ok := known[s.name]; ok {
			deliberate++
			t.Logf("deliberate difference in %s (%s):\n  %s: %s\n  %s: %s", s.name, why, real.name, a, lite.name, b)
			continue
		}
		diffs++
		t.Errorf("%s differs:\n  %s: %s\n  %s: %s", s.name, real.name, a, lite.name, b)
	}
	t.Logf("%d operations compared, %d differences (%d deliberate)", len(steps), diffs+deliberate, deliberate)
}

func setName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e12)
}

// rc renders a client error as its result code.
func rc(err as.Error) string {
	if err == nil {
		return "OK"
	}
	var ae *as.AerospikeError
	if errors.As(err, &ae) {
		return types.ResultCodeToString(ae.ResultCode) + "(" + strconv.Itoa(int(ae.ResultCode)) + ")"
	}
	return "ERR " + err.Error()
}

// ttl renders a record's TTL: "never", or rounded to 10 s (the two servers'
// clocks and the test's pace differ by a second or two).
func ttl(exp uint32) string {
	if exp == as.TTLServerDefault || exp == uint32(as.TTLDontExpire) || exp >= 0xFFFFFFF0 {
		return "never"
	}
	return "~" + strconv.Itoa(int((exp+5)/10*10))
}

func bins(m as.BinMap) string {
	if m == nil {
		return "nil"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%T=%v", k, m[k], m[k])
	}
	b.WriteByte('}')
	return b.String()
}

func rec(r *as.Record, err as.Error) string {
	if err != nil {
		return rc(err)
	}
	if r == nil {
		return "nil"
	}
	return fmt.Sprintf("gen=%d ttl=%s bins=%s", r.Generation, ttl(r.Expiration), bins(r.Bins))
}

func (t *target) key(k string) *as.Key {
	key, err := as.NewKey(t.ns, t.set, k)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return key
}

func wpol(exists as.RecordExistsAction, gen as.GenerationPolicy, g uint32, exp uint32) *as.WritePolicy {
	wp := as.NewWritePolicy(g, exp)
	wp.RecordExistsAction = exists
	wp.GenerationPolicy = gen
	wp.SendKey = true
	wp.MaxRetries = 0
	return wp
}

func put(t *target, k string, wp *as.WritePolicy, bm as.BinMap) string {
	err := t.client.Put(wp, t.key(k), bm)
	r, gerr := t.client.Get(nil, t.key(k))
	return rc(err) + " -> " + rec(r, gerr)
}

// genOf reads a record's generation (0 when missing) so that steps can
// send the current or a stale one.
func genOf(t *target, k string) uint32 {
	r, err := t.client.GetHeader(nil, t.key(k))
	if err != nil || r == nil {
		return 0
	}
	return r.Generation
}
