package fakechf

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/chf-testbed/testbed/chassis/h2c"
)

// Fast is a stand-in for the CHF that costs as little CPU per request as
// the project's HTTP/2 server allows: h2c only, the handler inline on the
// connection's reader goroutine, canned answers (201 with a fresh
// Location for a create, 200 for an update, event or balance inquiry,
// 204 for a release, X-Chf-Charged 0) and no accounts, no pricing, no
// state. It exists to measure the load generator alone (how many
// requests per second it can offer on time): a run against it must use
// --audit off, since it keeps no balances.
//
// A Fast server is safe for concurrent use.
type Fast struct {
	srv  h2c.Server
	ln   net.Listener
	next atomic.Uint64
	// Requests counts every request served.
	Requests atomic.Int64
}

// Canned bodies (the resultCode scanners of loadgen/driver/nchf accept
// them).
var (
	fastCharge  = []byte(`{"invocationSequenceNumber":0,"multipleUnitInformation":[{"resultCode":"SUCCESS"}]}`)
	fastBalance = []byte(`{"balance":0,"reserved":0,"available":0,"currency":"EUR"}`)
	fastCreate  = []byte("/nchf-convergedcharging/v3/chargingdata")
)

// StartFast listens on addr ("127.0.0.1:0" when empty) and serves.
func StartFast(addr string) (*Fast, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	f := &Fast{ln: ln}
	f.srv.Handler = f.serve
	f.srv.InlineHandler = true
	f.srv.MaxConcurrentStreams = 1000
	go f.srv.Serve(ln)
	return f, nil
}

// Addr returns host:port.
func (f *Fast) Addr() string { return f.ln.Addr().String() }

// Close stops the server and its connections.
func (f *Fast) Close() { f.srv.Close() }

func (f *Fast) serve(w *h2c.Response, r *h2c.Request) {
	f.Requests.Add(1)
	p := r.Path
	switch {
	case bytes.HasPrefix(p, []byte("/chf/v1/accounts/")):
		w.AddHeader("content-type", "application/json")
		w.Write(fastBalance)
		return
	case bytes.Equal(p, fastCreate):
		var loc [96]byte
		b := append(loc[:0], "/nchf-convergedcharging/v3/chargingdata/f"...)
		b = strconv.AppendUint(b, f.next.Add(1), 10)
		w.SetStatus(201)
		w.AddHeaderBytes("location", b)
	case bytes.HasSuffix(p, []byte("/release")):
		w.SetStatus(204)
		w.AddHeader("x-chf-charged", "0")
		return
	}
	w.AddHeader("x-chf-charged", "0")
	w.AddHeader("content-type", "application/json")
	w.Write(fastCharge)
}
