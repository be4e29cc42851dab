// Package gytest opens several Gy peer connections to one Diameter server,
// for tests and benchmarks that play N PGWs (as net/http/httptest serves
// HTTP tests). The load generator does not use it: its Gy driver
// (loadgen/driver/gy) keeps its own connections and redials them.
package gytest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chf-testbed/testbed/loadgen/gy"
)

// Pool is N connections to one server, each its own peer. Next and Conn
// are safe for concurrent use; Close is not (call it once, at the end).
type Pool struct {
	conns []*gy.Conn
	next  atomic.Uint32
}

// DialPool opens n connections with cfg (at least one). Connection i's
// Origin-Host is fmt.Sprintf(cfg.OriginHost, i) when OriginHost contains a
// '%' verb, else "p<i>." + OriginHost. On an error the connections opened
// so far are closed.
func DialPool(ctx context.Context, cfg gy.Config, n int) (*Pool, error) {
	if n <= 0 {
		n = 1
	}
	p := &Pool{conns: make([]*gy.Conn, 0, n)}
	for i := range n {
		c := cfg
		if strings.IndexByte(cfg.OriginHost, '%') >= 0 {
			c.OriginHost = fmt.Sprintf(cfg.OriginHost, i)
		} else {
			c.OriginHost = "p" + strconv.Itoa(i) + "." + cfg.OriginHost
		}
		conn, err := gy.DialConfig(ctx, c)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.conns = append(p.conns, conn)
	}
	return p, nil
}

// Len is the number of connections.
func (p *Pool) Len() int { return len(p.conns) }

// Conn returns connection i mod Len (pin a session to one peer with it).
func (p *Pool) Conn(i int) *gy.Conn { return p.conns[uint(i)%uint(len(p.conns))] }

// Next returns the connections round robin.
func (p *Pool) Next() *gy.Conn { return p.conns[int(p.next.Add(1))%len(p.conns)] }

// Close closes every connection (DPR/DPA), in parallel.
func (p *Pool) Close() error {
	var wg sync.WaitGroup
	for _, c := range p.conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	return nil
}
