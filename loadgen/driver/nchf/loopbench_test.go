//go:build linux && (amd64 || arm64)

package nchf

import (
	"strconv"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
)

// BenchmarkLoop is the event loop's per-request path against
// fakechf.Fast on loopback, 64 requests in flight: build, queue, write,
// read, decode and classify (the fake server's work, in the same process,
// is in the figure too). Each op is one request.
func BenchmarkLoop(b *testing.B) {
	for _, c := range []struct {
		name string
		op   driver.ChargeOp
	}{{"create", driver.ChargeCreate}, {"update", driver.ChargeUpdate}, {"balance", driver.ChargeBalance}} {
		op := c.op
		b.Run(c.name, func(b *testing.B) {
			f, err := fakechf.StartFast("")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			d, err := New(driver.Config{Targets: []string{f.Addr()}, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			l, err := d.NewWorker()
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			const inflight = 64
			type slot struct {
				c   driver.Charge
				o   driver.Outcome
				cb  func(error)
				err error
			}
			var free []*slot
			var fails int
			slots := make([]slot, inflight)
			for i := range slots {
				s := &slots[i]
				s.c = driver.Charge{Op: op, SUPI: []byte("imsi-00101000000" + strconv.Itoa(1000+i)), RatingGroup: 10, Request: true,
					Session: []byte("imsi-001010000001000.f1")}
				s.cb = func(err error) {
					if err != nil || s.o.Class != "" {
						fails++
					}
					free = append(free, s)
				}
				free = append(free, s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			sent, done := 0, 0
			for done < b.N {
				for len(free) > 0 && sent < b.N {
					s := free[len(free)-1]
					free = free[:len(free)-1]
					s.c.Seq++
					s.c.Invoked = time.Now()
					if err := l.Queue(&s.c, &s.o, s.cb); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				l.Flush()
				before := len(free)
				if err := l.Poll(5 * time.Millisecond); err != nil {
					b.Fatal(err)
				}
				done += len(free) - before
			}
			b.StopTimer()
			if fails > 0 {
				b.Fatalf("%d of %d requests failed", fails, b.N)
			}
		})
	}
}
