package cgw

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// keyCharger answers top-ups like the ABM does by key: the first of a
// key credits, the same key again is a replay, with another amount a
// ResultReplayMismatch. It records the keys it was given.
type keyCharger struct {
	mu      sync.Mutex
	digests map[uint64]uint64
	keys    []uint64
}

func (k *keyCharger) Charge(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	resp.Reset()
	k.keys = append(k.keys, req.Key)
	if req.Op != chf.OpTopUp || req.Key == 0 {
		return nil
	}
	d, ok := k.digests[req.Key]
	switch {
	case !ok:
		k.digests[req.Key] = req.Digest()
	case d != req.Digest():
		resp.Result = chf.ResultReplayMismatch
	default:
		resp.Replayed = true
	}
	return nil
}

// TestTopUpIdempotencyKey: both fronts pass the Idempotency-Key to the
// core as the top-up's Key (the same for the same key, 0 without one),
// refuse a malformed key with 400 and a key reused with another amount
// with 422, both naming the header.
func TestTopUpIdempotencyKey(t *testing.T) {
	for name, c := range clients(t) {
		kc := &keyCharger{digests: map[uint64]uint64{}}
		s := startWith(t, Config{Handler: HandlerConfig{OperatorOpen: true, Charger: kc}})
		topUp := AccountsBase + "imsi-001010000000001" + TopUpSuffix
		for _, tc := range []struct {
			key, body string
			status    int
		}{
			{"op-1", `{"amount":5}`, 200},
			{"op-1", `{"amount":5}`, 200},
			{"op-1", `{"amount":6}`, 422},
			{"op-2", `{"amount":5}`, 200},
			{"", `{"amount":5}`, 200},
			{strings.Repeat("k", MaxIdempotencyKey+1), `{"amount":5}`, 400},
			{"caf\xc3\xa9", `{"amount":5}`, 400},
		} {
			req := frontReq{method: "POST", target: topUp, body: []byte(tc.body)}
			if tc.key != "" {
				req.header = map[string]string{"Idempotency-Key": tc.key}
			}
			a := send(t, c, s.Addr(), req)
			what := name + " key " + tc.key + " " + tc.body
			if a.status != tc.status {
				t.Errorf("%s: %d %s, want %d", what, a.status, a.body, tc.status)
				continue
			}
			if tc.status != 200 {
				checkProblem(t, what, a, "", "Idempotency-Key")
			}
		}
		kc.mu.Lock()
		keys := kc.keys
		kc.mu.Unlock()
		if len(keys) != 5 || keys[0] == 0 || keys[0] != keys[1] || keys[1] != keys[2] || keys[3] == keys[0] || keys[3] == 0 || keys[4] != 0 {
			t.Errorf("%s: keys given to the core %v; want k k k k' 0", name, keys)
		}
	}
}
