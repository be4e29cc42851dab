package gy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// flagCore answers as scriptedCore does and records, per operation, the
// identity the CCR carried (Session-Id and CC-Request-Number); it answers
// busy (3004) the first time.
type flagCore struct {
	mu   sync.Mutex
	ids  []string
	busy bool
}

func (c *flagCore) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	c.mu.Lock()
	c.ids = append(c.ids, fmt.Sprintf("%s/%d", req.Session, req.Seq))
	busy := c.busy
	c.busy = false
	c.mu.Unlock()
	if busy {
		*resp = chf.ChargeResponse{Result: chf.ResultOverloaded}
		return nil
	}
	return scriptedCore{}.Charge(ctx, req, resp)
}

// A 3004 leaves the outcome unresolved and shed; the engine's retry of
// it (Charge.Retry) carries the T flag whatever the operation, a first
// attempt does not.
func TestGyRetryFlagged(t *testing.T) {
	core := &flagCore{busy: true}
	s, err := diameter.NewServer(diameter.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, core)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newFlagProxy(t, s.Addr())
	d, err := New(driver.Config{Proto: "gy", Targets: []string{p.addr}, Conns: 1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := driver.Charge{Op: driver.ChargeCreate, Flow: 9, SUPI: []byte("imsi-001010000000001"), RatingGroup: 10, Request: true}
	o, err := do(t, w, c)
	if err != nil || o.Class != "gy_3004" || !o.Shed || o.Resolved {
		t.Fatalf("busy: err %v, outcome %+v", err, o)
	}
	c.Retry = true
	if o, err = do(t, w, c); err != nil || o.Class != "" || !o.Resolved {
		t.Fatalf("retry: err %v, outcome %+v", err, o)
	}
	core.mu.Lock()
	defer core.mu.Unlock()
	if len(core.ids) != 2 || core.ids[0] != core.ids[1] {
		t.Fatalf("identity per attempt %v, want the same twice", core.ids)
	}
	if got := p.ccrFlags(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("T flag per CCR on the wire %v, want [false true]", got)
	}
}

// flagProxy relays one Diameter connection and records, for each CCR
// (command code 272, request bit set) the client sends, whether its
// header carried the T (potentially retransmitted) flag.
type flagProxy struct {
	addr string
	mu   sync.Mutex
	t    []bool
}

func newFlagProxy(t *testing.T, upstream string) *flagProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flagProxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		u, err := net.DialTimeout("tcp", upstream, 2*time.Second)
		if err != nil {
			return
		}
		defer u.Close()
		go io.Copy(c, u)
		r := bufio.NewReader(c)
		hdr := make([]byte, 20)
		for {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return
			}
			n := int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
			if n < 20 {
				return
			}
			body := make([]byte, n-20)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			code := int(hdr[5])<<16 | int(hdr[6])<<8 | int(hdr[7])
			if code == 272 && hdr[4]&0x80 != 0 {
				p.mu.Lock()
				p.t = append(p.t, hdr[4]&0x10 != 0)
				p.mu.Unlock()
			}
			if _, err := u.Write(append(hdr, body...)); err != nil {
				return
			}
		}
	}()
	return p
}

func (p *flagProxy) ccrFlags() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bool(nil), p.t...)
}
