package gy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/loadgen/gy/gytest"
)

// countingCharger grants quota, counting requests per SUPI and charging 1.
type countingCharger struct {
	mu    sync.Mutex
	n     int
	block chan struct{}
}

func (c *countingCharger) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	lines := resp.Lines[:0]
	*resp = chf.ChargeResponse{Lines: lines, Charged: 1, Currency: "EUR"}
	for _, l := range req.Lines {
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Granted: chf.Units{Time: 60}})
	}
	return nil
}

func startServer(t *testing.T, ch chf.Charger) *diameter.Server {
	t.Helper()
	s, err := diameter.NewServer(diameter.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPoolAsync(t *testing.T) {
	ch := &countingCharger{}
	s := startServer(t, ch)
	ctx := context.Background()
	p, err := gytest.DialPool(ctx, gy.Config{Addr: s.Addr(), OriginHost: "pgw%d.loadgen.test", OriginRealm: "loadgen.test"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	hosts := map[string]bool{}
	for i := range p.Len() {
		hosts[p.Conn(i).OriginHost()] = true
	}
	// The server counts a peer just after sending its CEA, so the client
	// may see the CEA first (a fresh-clone CI run saw 2 peers).
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Peers != 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if len(hosts) != 3 || !hosts["pgw0.loadgen.test"] || s.Stats().Peers != 3 {
		t.Fatalf("hosts %v, stats %+v", hosts, s.Stats())
	}
	const n = 300
	answers := make([]gy.Answer, n)
	var wg sync.WaitGroup
	wg.Add(n)
	var failed sync.Map
	for i := range n {
		c := p.Next()
		req := gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: "001010000000001",
			Services: []gy.Service{{RatingGroup: 20, Request: true}}}
		if err := c.Go(&req, &answers[i], func(a *gy.Answer, err error) {
			if err != nil || a.ResultCode != 2001 || a.Charged != 1 || len(a.Grants) != 1 || a.Grants[0].Granted.Time != 60 {
				failed.Store(i, err)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	failed.Range(func(k, v any) bool { t.Errorf("request %v: %v %+v", k, v, answers[k.(int)]); return true })
	if ch.n != n {
		t.Fatalf("core saw %d requests, want %d", ch.n, n)
	}
}

func TestTimeoutAndClose(t *testing.T) {
	ch := &countingCharger{block: make(chan struct{})}
	s := startServer(t, ch)
	c, err := gy.DialConfig(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: "pgw.loadgen.test", OriginRealm: "loadgen.test",
		Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req := gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: "001010000000001"}
	var a gy.Answer
	done := make(chan error, 1)
	if err := c.Go(&req, &a, func(_ *gy.Answer, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, gy.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Do(ctx, &req, &a); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do err = %v, want deadline exceeded", err)
	}
	close(ch.block)
	c.Close()
	if err := c.Go(&req, &a, func(*gy.Answer, error) {}); !errors.Is(err, gy.ErrClosed) {
		t.Fatalf("Go after Close = %v", err)
	}
}

func FuzzDecodeCCA(f *testing.F) {
	f.Add([]byte{1, 0, 0, 20, 0, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1})
	f.Add([]byte{1, 0, 0, 32, 0, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0xc8, 0x40, 0, 0, 12, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var a gy.Answer
		gy.DecodeCCA(msg, &a) // must not panic
	})
}
