package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"time"
)

// The network probes run as hidden `loadgen lab` subcommands inside the
// namespaces (the lab process itself stays in the host's namespace).

// ProbeSize is the request and response size of the RR probe, in bytes
// (a small Nchf-like exchange, one segment each way).
const ProbeSize = 64

// RTT is the RR probe's result, in microseconds.
type RTT struct {
	Count    int     `json:"count"`
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
	MinUs    float64 `json:"min_us"`
}

// ServeProbe echoes ProbeSize-byte messages on every connection accepted
// on addr until ctx ends.
func ServeProbe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cannot accept: %w", err)
		}
		go func() {
			defer c.Close()
			buf := make([]byte, ProbeSize)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// Ping does warm request/response exchanges with a ServeProbe at addr on
// one TCP connection, then count timed ones, one at a time.
func Ping(ctx context.Context, addr string, count int) (RTT, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return RTT{}, fmt.Errorf("cannot connect to the probe at %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	buf := make([]byte, ProbeSize)
	us := make([]float64, 0, count)
	for i := -count / 10; i < count; i++ {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			return RTT{}, fmt.Errorf("cannot send a probe: %w", err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return RTT{}, fmt.Errorf("cannot read a probe answer: %w", err)
		}
		if i >= 0 {
			us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	slices.Sort(us)
	if len(us) == 0 {
		return RTT{}, errors.New("no probe exchanged")
	}
	return RTT{Count: len(us), MedianUs: us[len(us)/2], P99Us: us[len(us)*99/100], MinUs: us[0]}, nil
}

// Wait polls addr until it accepts TCP connections (url empty) or url
// answers 200, or timeout passes.
func Wait(ctx context.Context, addr, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	var last error
	for {
		if url != "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			last = err
		} else {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
				return nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", timeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// GOMAXPROCS is what the Go runtime picks for a process started with this
// process's CPU mask and environment (the hidden `loadgen lab gomaxprocs`
// reports it for each service's mask).
func GOMAXPROCS() int { return runtime.GOMAXPROCS(0) }

// writeJSON writes v as one JSON line to w.
func writeJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// WriteRTT writes r as JSON for the lab process to read.
func WriteRTT(w io.Writer, r RTT) error { return writeJSON(w, r) }
