package driver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// sleeper answers after delay, or fails when ctx ends first.
type sleeper struct{ delay time.Duration }

func (s sleeper) Do(ctx context.Context, c *Charge, o *Outcome) error {
	select {
	case <-time.After(s.delay):
		o.Reset()
		o.Resolved = true
		o.Ref = append(o.Ref, c.SUPI...)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The pool runs charges on its goroutines, hands the outcomes back in
// Poll on the caller's goroutine, bounds each by the timeout, and Close
// abandons what is in flight without calling back.
func TestPool(t *testing.T) {
	p := NewPool(100*time.Millisecond, func() Exchange { return sleeper{10 * time.Millisecond} })
	var outs [3]Outcome
	var errs [3]error
	done := 0
	for i := range outs {
		c := Charge{SUPI: []byte{'a' + byte(i)}}
		if err := p.Queue(&c, &outs[i], func(err error) { errs[i] = err; done++ }); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for done < len(outs) && time.Now().Before(deadline) {
		p.Poll(50 * time.Millisecond)
	}
	for i, o := range outs {
		if errs[i] != nil || !o.Resolved || string(o.Ref) != string(rune('a'+i)) || o.Received.IsZero() {
			t.Fatalf("charge %d: %v %+v", i, errs[i], o)
		}
	}
	p.Close()

	slow := NewPool(50*time.Millisecond, func() Exchange { return sleeper{time.Hour} })
	var o Outcome
	var err error
	fired := false
	slow.Queue(&Charge{}, &o, func(e error) { err, fired = e, true })
	slow.Flush()
	t0 := time.Now()
	for !fired && time.Since(t0) < 5*time.Second {
		slow.Poll(20 * time.Millisecond)
	}
	if !errors.Is(err, ErrTimeout) || o.Class != ClassTimeout {
		t.Fatalf("after the timeout: %v, class %q", err, o.Class)
	}
	fired = false
	slow.Queue(&Charge{}, &o, func(error) { fired = true })
	slow.Flush()
	slow.Close() // returns at once: the request is cancelled
	if fired || time.Since(t0) > 2*time.Second {
		t.Fatalf("Close called back (%v) or waited (%v)", fired, time.Since(t0))
	}
}
