package rpc

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/internal/fuzzcorpus"
)

// The batch decoders read a peer's bytes: the OCP decodes batches of
// ChargeRequests from the CGW, the ABM batches of ApplyRequests from the
// OCP, and the CGW and OCP decode the batch replies. The fuzz targets
// check that they never panic, and that what they accept encodes back to
// bytes they decode to the same thing. Their seed corpus is kept in
// testdata/fuzz (regenerate with go generate ./chassis/rpc).

func chargeSeeds() [][]byte {
	reqs := []chf.ChargeRequest{
		{Op: 1, SUPI: "imsi-001010000000001", Session: "s1", Seq: 0, Lines: []chf.UsageLine{{RatingGroup: 10, Request: true}}},
		{Op: 2, SUPI: "imsi-001010000000002", Session: "s2", Seq: 1, Lines: []chf.UsageLine{{RatingGroup: 10, Used: chf.Units{TotalVolume: 1000}, Request: true}, {RatingGroup: 20}}},
		{Op: 4, SUPI: "imsi-001010000000003"},
	}
	return append(prefixBatches(reqs), AppendBatchHeader(nil, 0), AppendBatchHeader(nil, MaxBatch+1))
}

// prefixBatches encodes the batches of the first 1, 2, ... of reqs.
func prefixBatches[T any, R interface {
	*T
	Message
}](reqs []T) [][]byte {
	var out [][]byte
	for n := 1; n <= len(reqs); n++ {
		b := AppendBatchHeader(nil, n)
		for i := range n {
			b, _ = R(&reqs[i]).MarshalMsg(b)
		}
		out = append(out, b)
	}
	return out
}

func applySeeds() [][]byte {
	reqs := []chf.ApplyRequest{
		{Op: 1, SUPI: "imsi-001010000000001", Session: "s1", Lines: []chf.RatedLine{{RatingGroup: 10, Request: true, GrantUnits: 1 << 20, Price: 1, UnitSize: 1 << 20, ValidityTime: 3600}}},
		{Op: 2, SUPI: "imsi-001010000000002", Session: "s2", Seq: 1, Lines: []chf.RatedLine{{RatingGroup: 10, UsedUnits: 1000, UsedCost: 1}}},
		{Op: 4, SUPI: "imsi-001010000000003"},
	}
	return prefixBatches(reqs)
}

func replySeeds() [][]byte {
	resp := chf.ChargeResponse{Result: chf.ResultSuccess, Lines: []chf.GrantLine{{RatingGroup: 10, Granted: chf.Units{TotalVolume: 5}}}, Charged: 3, Balance: 97, Currency: "EUR"}
	b := AppendBatchHeader(nil, 3)
	b, _ = AppendBatchItem(b, 0, "", &resp)
	b, _ = AppendBatchItem(b, 503, "contended", nil)
	b, _ = AppendBatchItem(b, 0, "", &chf.ChargeResponse{})
	one := AppendBatchHeader(nil, 1)
	one, _ = AppendBatchItem(one, 500, "database", nil)
	return [][]byte{b, one}
}

// fuzzBatch checks batch[T...].Decode on body: no panic, and an accepted
// batch re-encodes to a batch that decodes and re-encodes identically.
func fuzzBatch[T, U any, R interface {
	*T
	Message
}, P interface {
	*U
	Message
}](t *testing.T, body []byte) {
	var b batch[T, U, R, P]
	if err := b.Decode(body); err != nil {
		return
	}
	enc := func(reqs []R) []byte {
		out := AppendBatchHeader(nil, len(reqs))
		for i, r := range reqs {
			var err error
			if out, err = r.MarshalMsg(out); err != nil {
				t.Fatalf("cannot re-encode request %d: %v", i, err)
			}
		}
		return out
	}
	first := enc(b.Reqs)
	var again batch[T, U, R, P]
	if err := again.Decode(first); err != nil {
		t.Fatalf("re-encoded batch rejected: %v", err)
	}
	if second := enc(again.Reqs); !bytes.Equal(first, second) {
		t.Fatalf("batch changed in a round trip:\n%x\n%x", first, second)
	}
	// Answering it must work too (every item failed, then none).
	for i := range b.Errs {
		b.Errs[i] = fmt.Errorf("item %d", i)
	}
	reply := b.AppendReply(nil, func(error) int { return 503 })
	if err := ReadBatchReply(reply, len(again.Reqs), func(int) *chf.ChargeResponse { return new(chf.ChargeResponse) }, func(int, int, string) {}); err != nil {
		t.Fatalf("own reply rejected: %v", err)
	}
}

// FuzzChargeBatch fuzzes the OCP's decoder of CGW batches.
func FuzzChargeBatch(f *testing.F) {
	for _, s := range chargeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBatch[chf.ChargeRequest, chf.ChargeResponse](t, body)
	})
}

// FuzzApplyBatch fuzzes the ABM's decoder of OCP batches.
func FuzzApplyBatch(f *testing.F) {
	for _, s := range applySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBatch[chf.ApplyRequest, chf.ChargeResponse](t, body)
	})
}

// FuzzBatchReply fuzzes the clients' decoder of batch replies.
func FuzzBatchReply(f *testing.F) {
	for _, s := range replySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, _, err := ReadBatchHeader(body)
		if err != nil {
			return
		}
		resps := make([]chf.ChargeResponse, n)
		type failure struct {
			status int
			msg    string
		}
		failed := map[int]failure{}
		err = ReadBatchReply(body, n, func(i int) *chf.ChargeResponse { return &resps[i] }, func(i, st int, msg string) { failed[i] = failure{st, msg} })
		if err != nil {
			return
		}
		// Re-encode what was read; it must read back the same.
		out := AppendBatchHeader(nil, n)
		for i := range resps {
			if f, ok := failed[i]; ok {
				out, _ = AppendBatchItem(out, f.status, f.msg, nil)
			} else if out, err = AppendBatchItem(out, 0, "", &resps[i]); err != nil {
				t.Fatalf("cannot re-encode item %d: %v", i, err)
			}
		}
		again := make([]chf.ChargeResponse, n)
		if err := ReadBatchReply(out, n, func(i int) *chf.ChargeResponse { return &again[i] }, func(i, st int, msg string) {
			if f := failed[i]; f.status != st || f.msg != msg {
				t.Fatalf("item %d failure changed: %d %q, then %d %q", i, f.status, f.msg, st, msg)
			}
		}); err != nil {
			t.Fatalf("re-encoded reply rejected: %v", err)
		}
		for i := range resps {
			a, _ := resps[i].MarshalMsg(nil)
			b, _ := again[i].MarshalMsg(nil)
			if _, ok := failed[i]; !ok && !bytes.Equal(a, b) {
				t.Fatalf("item %d changed in a round trip", i)
			}
		}
	})
}

// writeCorpus turns the test binary into the corpus writer (go generate):
// it writes the seeds into testdata/fuzz instead of testing.
var writeCorpus = flag.Bool("write-corpus", false, "write the fuzz seeds into testdata/fuzz and exit instead of testing (go generate)")

func TestMain(m *testing.M) {
	flag.Parse()
	if *writeCorpus {
		if err := writeSeeds(filepath.Join("testdata", "fuzz")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeSeeds writes the fuzz tests' seeds as their corpus under dir, so
// that the corpus is kept with the code and `go test` runs it as
// regression tests.
func writeSeeds(dir string) error {
	for name, seeds := range map[string][][]byte{"FuzzChargeBatch": chargeSeeds(), "FuzzApplyBatch": applySeeds(), "FuzzBatchReply": replySeeds()} {
		for i, s := range seeds {
			if err := fuzzcorpus.Write(dir, name, fmt.Sprintf("seed-%d", i), s); err != nil {
				return err
			}
		}
	}
	return nil
}
