package rpc

import (
	"reflect"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

func TestBatchReplyRoundTrip(t *testing.T) {
	resps := []chf.ChargeResponse{
		{Result: chf.ResultSuccess, Lines: []chf.GrantLine{{RatingGroup: 10, Granted: chf.Units{TotalVolume: 5}}}, Charged: 3, Balance: 97, Currency: "EUR", Debited: 3},
		{},
		{Result: chf.ResultUserUnknown, Detail: "no such subscriber"},
	}
	b := AppendBatchHeader(nil, 3)
	b, _ = AppendBatchItem(b, 0, "", &resps[0])
	b, _ = AppendBatchItem(b, 503, "contended", nil)
	b, _ = AppendBatchItem(b, 0, "", &resps[2])
	got := make([]chf.ChargeResponse, 3)
	failed := map[int]string{}
	err := ReadBatchReply(b, 3, func(i int) *chf.ChargeResponse { return &got[i] }, func(i, st int, msg string) {
		failed[i] = msg
		if st != 503 {
			t.Errorf("item %d status %d, want 503", i, st)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], resps[0]) || got[2].Result != chf.ResultUserUnknown || got[2].Detail != "no such subscriber" {
		t.Fatalf("decoded %+v", got)
	}
	if len(failed) != 1 || failed[1] != "contended" {
		t.Fatalf("failed items %v", failed)
	}
	// Count mismatch, truncation and bad headers are errors, not panics.
	if err := ReadBatchReply(b, 2, func(i int) *chf.ChargeResponse { return &got[i] }, func(int, int, string) {}); err == nil {
		t.Error("reply of 3 items accepted for 2 requests")
	}
	for n := range len(b) {
		if err := ReadBatchReply(b[:n], 3, func(i int) *chf.ChargeResponse { return &got[i] }, func(int, int, string) {}); err == nil {
			t.Errorf("truncated reply of %d bytes accepted", n)
		}
	}
	for _, n := range []int{0, MaxBatch + 1} {
		if _, _, err := ReadBatchHeader(AppendBatchHeader(nil, n)); err == nil || !strings.Contains(err.Error(), "batch of") {
			t.Errorf("batch of %d: %v", n, err)
		}
	}
}
