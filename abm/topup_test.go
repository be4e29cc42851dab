package abm

import (
	"context"
	"encoding/binary"
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

// lateProxy relays the Aerospike wire between the client and aslite and,
// once armed, holds the n-th data command from then (a write) until the store has
// answered the data command after it (the ABM's re-read of the record
// once the held write timed out), then forwards it: a write in doubt that
// lands after the re-read said it had not.
type lateProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Int32 // data commands to let through before the held one, plus one; 0 = unarmed
	mu     sync.Mutex   // one command forwarded at a time
	held   []byte
	heldTo net.Conn
	landed chan struct{}
	conns  []net.Conn
}

func startLateStore(t *testing.T) (*as.Client, *lateProxy) {
	t.Helper()
	srv, err := aslite.New(aslite.Config{Namespaces: []string{"chf"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lateProxy{ln: ln, target: srv.Addr(), landed: make(chan struct{}, 1)}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	host, port, _ := net.SplitHostPort(ln.Addr().String())
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

func (p *lateProxy) serve() {
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
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { // server → client
			defer c.Close()
			io.Copy(c, s) //nolint:errcheck // ends with either side
		}()
		go p.relay(c, s)
	}
}

// relay forwards c's commands to s, one message at a time.
func (p *lateProxy) relay(c, s net.Conn) {
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		n := binary.BigEndian.Uint64(hdr) & (1<<48 - 1)
		msg := make([]byte, 8+n)
		copy(msg, hdr)
		if _, err := io.ReadFull(c, msg[8:]); err != nil {
			return
		}
		p.mu.Lock()
		switch {
		case hdr[1] == 3 && p.armed.Load() > 0 && p.armed.Add(-1) == 0:
			p.held, p.heldTo = msg, s // the write waits
			p.mu.Unlock()
			continue
		case hdr[1] == 3 && p.held != nil:
			// The re-read: answered by the store first, then the held
			// write lands, before any other command goes.
			if _, err := s.Write(msg); err != nil {
				p.mu.Unlock()
				return
			}
			time.Sleep(50 * time.Millisecond)
			p.heldTo.Write(p.held) //nolint:errcheck // the test checks the balance
			p.held = nil
			time.Sleep(50 * time.Millisecond)
			p.landed <- struct{}{}
			p.mu.Unlock()
			continue
		}
		_, err := s.Write(msg)
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// TestTopUpInDoubtLandingLateCreditsOnce: the write of a top-up times out
// (in doubt), the re-read finds the record unchanged, and the write lands
// right after it. The ABM applies the top-up again on a fresh read; the
// record remembers the top-up's identity (the operator's key, or one the
// ABM gave it), so it is credited once, with and without a key.
func TestTopUpInDoubtLandingLateCreditsOnce(t *testing.T) {
	cl, p := startLateStore(t)
	const first = "imsi-001010000000001"
	provisionAccounts(t, cl, first, 2, 1000)
	for i, key := range []uint64{0, 77} {
		supi := "imsi-00101000000000" + strconv.Itoa(i+1)
		t.Run("key="+strconv.FormatUint(key, 10), func(t *testing.T) {
			svc := New(cl, Config{AccountCache: -1, Timeout: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req := &chf.ApplyRequest{Op: chf.OpTopUp, SUPI: supi, Key: key, Digest: 5, TopUp: chf.TopUp{Amount: 364}}
			p.armed.Store(2) // the read goes, the write is held
			var resp chf.ChargeResponse
			err := svc.Apply(ctx, req, &resp)
			select {
			case <-p.landed:
			default:
				t.Fatalf("the held write was not forwarded after a re-read (answer %+v, %v)", resp, err)
			}
			if err != nil {
				t.Fatalf("top-up: %v", err)
			}
			if st := svc.Stats(); st.InDoubtLost == 0 {
				t.Fatalf("the write was not settled as lost first: %+v", st)
			}
			var r chf.ChargeResponse
			if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &r); err != nil {
				t.Fatal(err)
			}
			if r.Credited != 364 || r.Balance != 1364 || resp.Credited != 364 {
				t.Fatalf("credited %d, balance %d (answered credited %d); want one top-up of 364", r.Credited, r.Balance, resp.Credited)
			}
		})
	}
}

// TestTopUpIdempotencyKey: a top-up repeated with its key is answered
// with the balance as it stands, marked as a replay, and credits nothing;
// the key with another amount is ResultReplayMismatch; other keys and
// top-ups without one credit. Top-up identities do not push out those of
// events.
func TestTopUpIdempotencyKey(t *testing.T) {
	cl := startStore(t)
	const supi = "imsi-001010000000001"
	provisionAccounts(t, cl, supi, 1, 1000)
	svc := New(cl, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	do := func(req *chf.ApplyRequest) chf.ChargeResponse {
		t.Helper()
		var r chf.ChargeResponse
		if err := svc.Apply(ctx, req, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ev := &chf.ApplyRequest{Op: chf.OpEvent, SUPI: supi, Key: 9, Digest: 9, Lines: []chf.RatedLine{smsLine(7)}}
	if r := do(ev); r.Charged != 7 {
		t.Fatalf("event: %+v", r)
	}
	topUp := func(key, digest uint64, amount int64) *chf.ApplyRequest {
		return &chf.ApplyRequest{Op: chf.OpTopUp, SUPI: supi, Key: key, Digest: digest, TopUp: chf.TopUp{Amount: amount}}
	}
	for _, tc := range []struct {
		name              string
		req               *chf.ApplyRequest
		result            chf.Result
		replayed          bool
		credited, balance int64
	}{
		{"first", topUp(1, 100, 100), chf.ResultSuccess, false, 100, 1093},
		{"again", topUp(1, 100, 100), chf.ResultSuccess, true, 100, 1093},
		{"other content", topUp(1, 200, 200), chf.ResultReplayMismatch, false, 100, 1093},
		{"another key", topUp(2, 100, 100), chf.ResultSuccess, false, 200, 1193},
		{"no key", topUp(0, 100, 100), chf.ResultSuccess, false, 300, 1293},
		{"no key again", topUp(0, 100, 100), chf.ResultSuccess, false, 400, 1393},
	} {
		r := do(tc.req)
		if r.Result != tc.result || r.Replayed != tc.replayed || r.Credited != tc.credited || r.Balance != tc.balance {
			t.Fatalf("%s: result %v replayed %v credited %d balance %d; want %v %v %d %d", tc.name, r.Result, r.Replayed, r.Credited, r.Balance,
				tc.result, tc.replayed, tc.credited, tc.balance)
		}
	}
	// More top-ups than MaxRecent: the event's identity stays.
	for k := range uint64(MaxRecent + 2) {
		do(topUp(100+k, 1, 1))
	}
	if r := do(ev); !r.Replayed || r.Charged != 7 {
		t.Fatalf("event again after %d top-ups: %+v, want its replay", MaxRecent+2, r)
	}
	if r := do(topUp(100+MaxRecent+1, 1, 1)); !r.Replayed {
		t.Fatalf("the latest top-up again: %+v, want a replay", r)
	}
}
