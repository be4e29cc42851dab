package audit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// TestReadGivesUpOnSilentCHF: against a server that accepts connections
// and never answers, Read of a large range ends after its first failed
// reads, not after every read's timeout.
func TestReadGivesUpOnSilentCHF(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, proto := range []string{"h2c", "http1"} {
		t.Run(proto, func(t *testing.T) {
			d, err := nchf.New(driver.Config{Proto: proto, Targets: []string{ln.Addr().String()}, Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			first, _ := scenario.ParseSUPI("imsi-001010000000001")
			t0 := time.Now()
			_, err = Read(context.Background(), d, first, AllIndexes(100_000), 32)
			if !errors.Is(err, ErrRead) {
				t.Fatalf("Read against a silent CHF: %v, want ErrRead", err)
			}
			// 64 failed reads of 3 tries × 100 ms over 32 readers: about
			// a second; every read's timeout would be hours.
			if d := time.Since(t0); d > 20*time.Second {
				t.Fatalf("Read took %v against a silent CHF", d)
			}
		})
	}
}
