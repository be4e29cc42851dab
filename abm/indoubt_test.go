package abm

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite"
	"github.com/chf-testbed/testbed/chf"
)

// cutMode is what cutProxy does to the armed command.
type cutMode int32

const (
	cutNone   cutMode = iota
	cutLanded         // forward it, drop the answer, close: the write landed
	cutLost           // close before forwarding it: the write never landed
	cutStall          // forward it, hold the answer and every later command
)

// cutProxy relays the Aerospike wire between the client and aslite and,
// once armed, cuts the connection at the armed data command (message type
// 3), counted from the arming: the official client sees the command sent
// and its answer lost, a write in doubt.
type cutProxy struct {
	ln      net.Listener
	target  string
	mode    atomic.Int32
	at      atomic.Int32 // the armed command's number, 0 = unarmed
	seen    atomic.Int32
	stalled chan struct{}
	mu      sync.Mutex
	conns   []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, stalled: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

// arm cuts the n-th data command from now with mode.
func (p *cutProxy) arm(n int32, mode cutMode) {
	p.seen.Store(0)
	p.mode.Store(int32(mode))
	p.at.Store(n)
}

func (p *cutProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		var cut, hold atomic.Bool
		go func() { // server → client
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if hold.Load() {
					<-p.stalled // the answer never comes
					return
				}
				if n > 0 && !cut.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if cut.Load() {
					return // the answer is dropped with the connection
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // client → server, message by message
			defer s.Close()
			hdr := make([]byte, 8)
			for {
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				n := binary.BigEndian.Uint64(hdr) & (1<<48 - 1)
				body := make([]byte, n)
				if _, err := io.ReadFull(c, body); err != nil {
					return
				}
				armed := false
				if hdr[1] == 3 {
					if at := p.at.Load(); at > 0 {
						n := p.seen.Add(1)
						armed = n == at
						if n > at && cutMode(p.mode.Load()) == cutStall {
							<-p.stalled // the store answers nothing more
							return
						}
					}
				}
				if armed {
					switch cutMode(p.mode.Load()) {
					case cutLost:
						c.Close()
						return
					case cutLanded:
						cut.Store(true)
					case cutStall:
						hold.Store(true)
					}
				}
				if _, err := s.Write(append(hdr, body...)); err != nil {
					return
				}
			}
		}()
	}
}

// startCutStore starts aslite behind a cutProxy and returns a client that
// talks through the proxy, and the proxy.
func startCutStore(t *testing.T) (*as.Client, *cutProxy) {
	t.Helper()
	srv, err := aslite.New(aslite.Config{Namespaces: []string{"chf"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	p := startCutProxy(t, srv.Addr())
	host, port, _ := net.SplitHostPort(p.ln.Addr().String())
	pn, _ := strconv.Atoi(port)
	cp := as.NewClientPolicy()
	cp.Timeout = 5 * time.Second
	cl, aerr := as.NewClientWithPolicyAndHost(cp, as.NewHost(host, pn))
	if aerr != nil {
		t.Fatal(aerr)
	}
	t.Cleanup(cl.Close)
	return cl, p
}

// TestWriteInDoubtIsSettled cuts the connection at the write of a charging
// event, after aslite applied it (landed) or before (lost), with the
// account cache on and off, through Apply and ApplyBatch: each event is
// answered as charged exactly once and the balance moved by exactly what
// the answers say. A store that never answers leaves the write in doubt
// and the event answered with an error, within its deadline.
func TestWriteInDoubtIsSettled(t *testing.T) {
	cl, p := startCutStore(t)
	const first = "imsi-001010000000001"
	const balance = 1000
	provisionAccounts(t, cl, first, 4, balance)
	for _, tc := range []struct {
		name  string
		mode  cutMode
		cache int
		batch bool
	}{
		{"landed", cutLanded, -1, false},
		{"lost", cutLost, -1, false},
		{"landed/cache", cutLanded, 0, false},
		{"lost/cache", cutLost, 0, false},
		{"landed/batch", cutLanded, -1, true},
		{"lost/batch", cutLost, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := New(cl, Config{AccountCache: tc.cache})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			supis := []string{"imsi-001010000000001", "imsi-001010000000002"}
			before := map[string]int64{}
			for _, s := range supis {
				var r chf.ChargeResponse
				if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}, &r); err != nil {
					t.Fatal(err)
				}
				before[s] = r.Balance
			}
			var reqs []*chf.ApplyRequest
			var resps []*chf.ChargeResponse
			for i, s := range supis {
				key := uint64(time.Now().UnixNano()) + uint64(i)
				reqs = append(reqs, &chf.ApplyRequest{Op: chf.OpEvent, SUPI: s, Key: key, Digest: key ^ 7, Lines: []chf.RatedLine{smsLine(7)}})
				resps = append(resps, &chf.ChargeResponse{})
			}
			if tc.cache >= 0 {
				// A first event puts the accounts in the cache, so that the
				// cut event is written without a read.
				for _, s := range supis {
					var r chf.ChargeResponse
					k := uint64(time.Now().UnixNano())
					if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpEvent, SUPI: s, Key: k, Digest: k, Lines: []chf.RatedLine{smsLine(1)}}, &r); err != nil || r.Charged != 1 {
						t.Fatalf("warm-up: %+v %v", r, err)
					}
					before[s] -= 1
				}
			}
			if tc.batch {
				// One batch read, then the batch write is cut.
				p.arm(2, tc.mode)
				errs := make([]error, len(reqs))
				svc.ApplyBatch(ctx, reqs, resps, errs)
				for i, err := range errs {
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
				}
			} else {
				n := int32(2) // read, write
				if tc.cache >= 0 {
					n = 1 // write from the cache
				}
				p.arm(n, tc.mode)
				if err := svc.Apply(ctx, reqs[0], resps[0]); err != nil {
					t.Fatal(err)
				}
				reqs, resps, supis = reqs[:1], resps[:1], supis[:1]
			}
			p.arm(0, cutNone)
			st := svc.Stats()
			if tc.mode == cutLanded && st.InDoubtLanded == 0 || tc.mode == cutLost && st.InDoubtLost == 0 {
				t.Fatalf("the cut did not put a write in doubt: %+v", st)
			}
			for i, s := range supis {
				if resps[i].Result != chf.ResultSuccess || resps[i].Charged != 7 {
					t.Fatalf("%s: answered %+v, want charged 7", s, resps[i])
				}
				var r chf.ChargeResponse
				if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}, &r); err != nil {
					t.Fatal(err)
				}
				if got := before[s] - r.Balance; got != 7 {
					t.Fatalf("%s: balance moved by %d, answered charged 7", s, got)
				}
				// The event again: a replay reporting the first charge,
				// charged once.
				var again chf.ChargeResponse
				if err := svc.Apply(ctx, reqs[i], &again); err != nil || again.Charged != 7 || !again.Replayed || again.Result != chf.ResultSuccess || again.Balance != r.Balance {
					t.Fatalf("%s: replay %+v %v, want charged 7 replayed at balance %d", s, again, err, r.Balance)
				}
			}
		})
	}

	t.Run("stalled", func(t *testing.T) {
		svc := New(cl, Config{AccountCache: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		p.arm(2, cutStall)
		defer close(p.stalled)
		start := time.Now()
		k := uint64(start.UnixNano())
		var r chf.ChargeResponse
		err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-001010000000003", Key: k, Digest: k, Lines: []chf.RatedLine{smsLine(5)}}, &r)
		took := time.Since(start)
		p.arm(0, cutNone)
		if err == nil {
			t.Fatalf("answered %+v with the store stalled", r)
		}
		if took > time.Second {
			t.Fatalf("in doubt for %s, beyond the 300ms deadline", took)
		}
		if svc.Stats().InDoubtLeft == 0 && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("not counted as left in doubt: %v %+v", err, svc.Stats())
		}
	})
}

// TestDecideBeyondNextGeneration: a record written again after a write in
// doubt tells by the identities it keeps whether that write landed.
func TestDecideBeyondNextGeneration(t *testing.T) {
	svc := New(nil, Config{})
	var acc account
	acc.balance = 100
	acc.currency = "EUR"
	ev := &chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-1", Key: 42, Digest: 9, Lines: []chf.RatedLine{smsLine(3)}}
	var resp chf.ChargeResponse
	if !acc.apply(ev, 1_800_000_000, &svc.lim, &resp) {
		t.Fatal("event wrote nothing")
	}
	rec := func(a *account, gen uint32) *as.Record {
		return &as.Record{Generation: gen, Bins: as.BinMap{BinBalance: int(a.balance), BinDebited: int(a.debited), BinCurrency: a.currency, BinSessions: a.appendSessions(nil)}}
	}
	blob := acc.appendSessions(nil)
	var fresh account
	f := func(r *as.Record, gen uint32, reqs []*chf.ApplyRequest, landed, known bool) {
		t.Helper()
		l, k := svc.decide(r, gen, &acc, blob, reqs, &fresh)
		if l != landed || k != known {
			t.Fatalf("generation %d (written at %d): landed %v known %v, want %v %v", r.Generation, gen, l, k, landed, known)
		}
	}
	var empty account
	empty.balance, empty.currency = 100, "EUR"
	f(rec(&empty, 5), 5, []*chf.ApplyRequest{ev}, false, true) // unchanged
	f(rec(&acc, 6), 5, []*chf.ApplyRequest{ev}, true, true)    // ours, next generation
	f(rec(&empty, 6), 5, []*chf.ApplyRequest{ev}, false, true) // another write took it
	f(rec(&acc, 9), 5, []*chf.ApplyRequest{ev}, true, true)    // ours, then others
	f(rec(&empty, 9), 5, []*chf.ApplyRequest{ev}, false, true) // others only
	top := &chf.ApplyRequest{Op: chf.OpTopUp, SUPI: "imsi-1"}
	f(rec(&acc, 9), 5, []*chf.ApplyRequest{top}, false, false) // no identity to tell
}
