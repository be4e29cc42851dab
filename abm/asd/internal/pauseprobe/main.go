// Command pauseprobe shows what Aerospike's availability (AP) mode does to
// acknowledged writes when one node of a replicated cluster pauses: it
// starts a 3-node cluster (replication factor 2) of the real server,
// increments counters from several workers (server-side add, no client
// retries, each acknowledged increment counted), pauses one node with
// SIGSTOP, resumes it, waits for migrations to end, and compares each
// counter with the increments acknowledged for it. No ABM is involved: a
// counter below its acknowledged count is a write the store acknowledged
// and then lost.
//
//	go run ./abm/asd/internal/pauseprobe -runs 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/abm/provision"
)

func main() {
	fs := flag.NewFlagSet("pauseprobe", flag.ContinueOnError)
	bin := fs.String("asd-binary", "", "the Aerospike server (default: $"+asd.EnvBinary+" or ../shared/aerospike/asd)")
	runs := fs.Int("runs", 1, "clusters to run, one after the other (1..20)")
	keys := fs.Int("keys", 300, "counters (1..100000)")
	workers := fs.Int("workers", 16, "writers (1..256)")
	pause := fs.Duration("pause", 5*time.Second, "how long node 1 stays stopped (100ms..60s)")
	fault := fs.String("fault", "stop", "stop (SIGSTOP, then SIGCONT) or kill (SIGKILL, then a restart)")
	dir := fs.String("dir", "", "work directory (default: a new temporary one, removed at the end)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	switch {
	case *runs < 1 || *runs > 20:
		usage("cannot use --runs %d: must be 1..20", *runs)
	case *keys < 1 || *keys > 100000:
		usage("cannot use --keys %d: must be 1..100000", *keys)
	case *workers < 1 || *workers > 256:
		usage("cannot use --workers %d: must be 1..256", *workers)
	case *pause < 100*time.Millisecond || *pause > time.Minute:
		usage("cannot use --pause %v: must be 100ms..60s", *pause)
	case *fault != "stop" && *fault != "kill":
		usage("cannot use --fault %q: want stop or kill", *fault)
	}
	if *bin == "" {
		root, _ := os.Getwd()
		b, err := asd.DefaultBinary(root)
		if err != nil {
			usage("cannot find the Aerospike server: %v (give --asd-binary)", err)
		}
		*bin = b
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for r := 1; r <= *runs; r++ {
		res, err := probe(ctx, *bin, *dir, *keys, *workers, *pause, *fault)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pauseprobe: run %d: %v\n", r, err)
			os.Exit(1)
		}
		fmt.Printf("run %d: %s\n", r, res)
	}
}

func usage(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "pauseprobe: "+format+"\n", a...)
	os.Exit(2)
}

type result struct {
	acked, failed       int64
	lowKeys, lost, high int64
}

func (r result) String() string {
	return fmt.Sprintf("acknowledged %d, failed %d; counters below their acknowledged count %d (%d acknowledged increments lost); above acknowledged+failed %d",
		r.acked, r.failed, r.lowKeys, r.lost, r.high)
}

func probe(ctx context.Context, bin, dir string, n, workers int, pause time.Duration, fault string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if dir == "" {
		d, err := os.MkdirTemp("", "pauseprobe-")
		if err != nil {
			return result{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if d, err := os.MkdirTemp(dir, "run-"); err != nil {
		return result{}, err
	} else {
		dir = d
	}
	c, err := asd.Start(ctx, asd.Options{Binary: bin, Dir: dir, Nodes: 3, DataSize: "512M"})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	hosts, err := provision.ParseHosts(strings.Join(c.Hosts(), ","))
	if err != nil {
		return result{}, err
	}
	cl, err := abm.Dial(hosts)
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	// A cluster that has just formed may still answer slowly: creating
	// the counters retries (nothing runs against them yet).
	cp := as.NewWritePolicy(0, 0)
	cp.TotalTimeout, cp.SocketTimeout, cp.MaxRetries, cp.SleepBetweenRetries = 30*time.Second, 5*time.Second, 10, 200*time.Millisecond
	ks := make([]*as.Key, n)
	for i := range ks {
		if ks[i], err = as.NewKey(c.Namespace(), "counters", i); err != nil {
			return result{}, err
		}
		if err := cl.PutBins(cp, ks[i], as.NewBin("v", 0)); err != nil {
			return result{}, fmt.Errorf("cannot create counter %d: %w", i, err)
		}
	}
	acked := make([]atomic.Int64, n)
	failed := make([]atomic.Int64, n)
	wp := as.NewWritePolicy(0, 0)
	wp.MaxRetries = 0 // an increment in doubt is counted as failed, never replayed
	wp.TotalTimeout, wp.SocketTimeout = time.Second, time.Second
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				k := rand.IntN(n)
				if _, err := cl.Operate(wp, ks[k], as.AddOp(as.NewBin("v", 1))); err != nil {
					failed[k].Add(1)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				acked[k].Add(1)
			}
		}()
	}
	sleep := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = sleep(5 * time.Second)
	if err == nil {
		node := c.Node(1)
		if fault == "stop" {
			err = node.Stop()
			if err == nil {
				err = errors.Join(sleep(pause), node.Cont())
			}
		} else {
			err = node.Kill()
			if err == nil {
				err = sleep(pause)
			}
			if err == nil {
				err = node.Restart(ctx)
			}
		}
	}
	if err == nil {
		err = sleep(15 * time.Second)
	}
	close(done)
	wg.Wait()
	if err != nil {
		return result{}, err
	}
	for {
		m, err := c.MigrationsRemaining(ctx)
		if err == nil && m == 0 {
			break
		}
		if err := sleep(500 * time.Millisecond); err != nil {
			return result{}, fmt.Errorf("cannot wait for migrations to end: %w", err)
		}
	}
	rp := as.NewPolicy()
	rp.ReadModeAP = as.ReadModeAPAll
	var res result
	for i, k := range ks {
		rec, err := cl.Get(rp, k)
		if err != nil {
			return result{}, fmt.Errorf("cannot read counter %d: %w", i, err)
		}
		v, _ := rec.Bins["v"].(int)
		got, lo, fl := int64(v), acked[i].Load(), failed[i].Load()
		res.acked += lo
		res.failed += fl
		switch {
		case got < lo:
			res.lowKeys++
			res.lost += lo - got
		case got > lo+fl:
			res.high += got - lo - fl
		}
	}
	return res, nil
}
