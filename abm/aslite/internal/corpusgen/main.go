// Command corpusgen records the requests the official Aerospike client
// sends to an aslite (puts, gets, operates, batches, a scan, compression,
// a truncate) and writes each distinct one as a seed of aslite's fuzz
// tests into testdata/fuzz: the whole frame for FuzzConn, the message
// body for FuzzMessage. `go test` runs the corpus as regression tests.
// Run it with `go generate ./abm/aslite` after a client upgrade; entries
// the fuzzer found (found-*) are left alone.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite"
	"github.com/chf-testbed/testbed/internal/fuzzcorpus"
)

// protoMsg is the proto type of an AS_MSG frame (the second header byte).
const protoMsg = 3

func main() {
	dir := flag.String("dir", "testdata/fuzz", "the fuzz corpus directory to write into")
	flag.Parse()
	frames, err := record()
	if err != nil {
		log.Fatal(err)
	}
	for n, msg := range frames {
		name := fmt.Sprintf("client-%03d", n)
		if err := fuzzcorpus.Write(*dir, "FuzzConn", name, msg); err != nil {
			log.Fatal(err)
		}
		if msg[1] == protoMsg {
			if err := fuzzcorpus.Write(*dir, "FuzzMessage", name, msg[8:]); err != nil {
				log.Fatal(err)
			}
		}
	}
	log.Printf("wrote %d corpus entries", len(frames))
}

// record runs the client's traffic against an aslite and returns the
// distinct frames it sent, in order.
func record() ([][]byte, error) {
	s, err := aslite.New(aslite.Config{Namespaces: []string{"chf", "other"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("cannot start aslite: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	rl := &recordingListener{Listener: ln}
	go s.Serve(rl)
	defer s.Close()
	if err := traffic(ln.Addr().String()); err != nil {
		return nil, err
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var out [][]byte
	seen := map[string]bool{}
	for _, buf := range rl.conns {
		b := buf.Bytes()
		for len(b) >= 8 {
			size := int(binary.BigEndian.Uint64(b) & 0xFFFFFFFFFFFF)
			if 8+size > len(b) {
				break
			}
			msg := b[:8+size]
			b = b[8+size:]
			if !seen[string(msg)] {
				seen[string(msg)] = true
				out = append(out, msg)
			}
		}
	}
	return out, nil
}

// traffic sends one of each kind of request the client makes; their
// answers do not matter.
func traffic(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	cp := as.NewClientPolicy()
	cp.Timeout = 5 * time.Second
	cp.TendInterval = 50 * time.Millisecond
	c, aerr := as.NewClientWithPolicy(cp, host, p)
	if aerr != nil {
		return fmt.Errorf("cannot connect the client: %w", aerr)
	}
	key := func(k string) *as.Key {
		kk, err := as.NewKey("chf", "accounts", k)
		if err != nil {
			log.Fatal(err)
		}
		return kk
	}
	wp := func() *as.WritePolicy {
		p := as.NewWritePolicy(0, 0)
		p.TotalTimeout = 5 * time.Second
		return p
	}
	k := key("corpus")
	wpk := wp()
	wpk.SendKey = true
	c.Put(wpk, k, as.BinMap{"balance": 100, "currency": "EUR", "res": []byte{1, 2}, "f": 1.5, "b": true, "l": []any{1, "a"}, "m": map[any]any{"k": 1}})
	c.Get(nil, k)
	c.Get(nil, k, "balance")
	c.GetHeader(nil, k)
	gp := wp()
	gp.GenerationPolicy = as.EXPECT_GEN_EQUAL
	gp.Generation = 1
	c.Put(gp, k, as.BinMap{"balance": 99})
	c.Operate(wp(), k, as.AddOp(as.NewBin("balance", 1)), as.AppendOp(as.NewBin("currency", "x")), as.GetOp())
	c.Touch(wp(), k)
	c.BatchGet(nil, []*as.Key{k, key("x")})
	c.BatchOperate(nil, []as.BatchRecordIfc{as.NewBatchWrite(nil, k, as.PutOp(as.NewBin("a", 1))), as.NewBatchDelete(nil, key("y"))})
	if rs, err := c.ScanAll(nil, "chf", "accounts"); err == nil {
		for range rs.Results() {
		}
	}
	cpol := wp()
	cpol.UseCompression = true
	c.Put(cpol, k, as.BinMap{"big": bytes.Repeat([]byte("z"), 300)})
	c.Delete(wp(), k)
	c.Truncate(nil, "chf", "accounts", nil)
	time.Sleep(100 * time.Millisecond)
	c.Close()
	return nil
}

// recordingListener records every byte clients send, per connection.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	l.mu.Lock()
	l.conns = append(l.conns, buf)
	l.mu.Unlock()
	return &recordingConn{Conn: nc, l: l, buf: buf}, nil
}

type recordingConn struct {
	net.Conn
	l   *recordingListener
	buf *bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}
