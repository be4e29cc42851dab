package diameter

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/loadgen/gy/gytest"
)

// fastCharger grants a fixed quota without state: it isolates the cost
// of the Diameter front.
type fastCharger struct{}

func (fastCharger) Charge(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	lines := resp.Lines[:0]
	*resp = chf.ChargeResponse{Lines: lines, Charged: 4, Balance: 1000, Currency: "EUR"}
	for _, l := range req.Lines {
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Granted: chf.Units{TotalVolume: 10_000_000},
			ValidityTime: 1800, QuotaHoldingTime: 300})
	}
	return nil
}

func updateCCR() []byte { return seedCCRs()[1] }

func BenchmarkDecodeCCR(b *testing.B) {
	msg := updateCCR()
	var c ccr
	var req chf.ChargeRequest
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		decodeCCR(msg, &c)
		c.fill(&req)
	}
}

func BenchmarkEncodeCCA(b *testing.B) {
	msg := updateCCR()
	var c ccr
	decodeCCR(msg, &c)
	s, _ := NewServer(Config{Logger: quiet}, fastCharger{})
	var req chf.ChargeRequest
	c.fill(&req)
	var resp chf.ChargeResponse
	fastCharger{}.Charge(context.Background(), &req, &resp)
	a := answer{result: 2001, resp: &resp, op: chf.OpUpdate, defaultCur: "EUR"}
	out := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		out = appendCCA(out[:0], &c, s.ident, &a)
	}
	b.SetBytes(int64(len(out)))
}

// BenchmarkAnswerCCR is the whole per-CCR work of the server except the
// socket: decode, map, charge (fast fake), encode.
func BenchmarkAnswerCCR(b *testing.B) {
	msg := updateCCR()
	s, _ := NewServer(Config{Logger: quiet}, fastCharger{})
	st := &ccrState{}
	b.ReportAllocs()
	for b.Loop() {
		st.out = s.answerCCR(msg, st)
	}
}

// BenchmarkGoDiameterDecodeCCR is the reflection/dictionary path this
// package avoids, for comparison.
func BenchmarkGoDiameterDecodeCCR(b *testing.B) {
	msg := updateCCR()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := diamRead(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip is a CCR-U/CCA over loopback TCP through the server
// with the fast fake core, 64 requests in flight per connection.
func BenchmarkRoundTrip(b *testing.B) {
	for _, conns := range []int{1, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			s := startServer(b, Config{}, fastCharger{})
			p, err := gytest.DialPool(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: "pgw%d.loadgen.test", OriginRealm: "loadgen.test"}, conns)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var next atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(64 * conns / max(1, runtimeProcs()))
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1)
				c := p.Conn(int(i))
				req := gy.Request{SessionID: c.NewSessionID(), Type: gy.Update, Number: 1, IMSI: imsi1, Services: []gy.Service{
					{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 3_500_000}}}}
				var a gy.Answer
				ctx := context.Background()
				for pb.Next() {
					if err := c.Do(ctx, &req, &a); err != nil || a.ResultCode != 2001 {
						b.Fatalf("%v %d", err, a.ResultCode)
					}
				}
			})
		})
	}
}

func TestCCRPathAllocs(t *testing.T) {
	msg := updateCCR()
	s, _ := NewServer(Config{Logger: quiet}, fastCharger{})
	st := &ccrState{}
	st.out = s.answerCCR(msg, st)
	// Two strings per CCR are handed to the core (SUPI, Session): the
	// only allocations on the path.
	if n := testing.AllocsPerRun(200, func() { st.out = s.answerCCR(msg, st) }); n > 2 {
		t.Fatalf("answerCCR allocates %.1f times per CCR, want <= 2", n)
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func diamRead(msg []byte) (*diam.Message, error) {
	return diam.ReadMessage(bytesReader(msg), dict.Default)
}
