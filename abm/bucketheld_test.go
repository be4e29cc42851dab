package abm

import (
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// TestBucketHeldReportedOnce: held units are reported on the first bucket
// of their service only, even when a bucket of another service sits
// between two of its buckets.
func TestBucketHeldReportedOnce(t *testing.T) {
	var a account
	a.balance = 1000
	a.buckets = []bucket{{svc: chf.ServiceData, units: 100}, {svc: chf.ServiceVoice, units: 50}, {svc: chf.ServiceData, units: 100}}
	a.sessions = []session{{id: []byte("s"), res: []reservation{{rg: 10, units: 150, bunits: 150, svc: chf.ServiceData}}}}
	var resp chf.ChargeResponse
	a.fillBuckets(&resp, 1_800_000_000)
	var held [4]uint64
	for _, b := range resp.Buckets {
		held[b.Service] += b.Held
	}
	if held[chf.ServiceData] != 150 || held[chf.ServiceVoice] != 0 {
		t.Fatalf("held per service %v in %+v; want data 150 once, voice 0", held, resp.Buckets)
	}
}
