package testbed

import (
	"reflect"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/local"
)

// TestShardPlans: each shard of the range gets the scenario's postpaid
// and bucket shares of its own subscribers, offset from the range's
// first, and its own audit initial state by index from its first.
func TestShardPlans(t *testing.T) {
	sc := scenario.Default()
	sc.Subscribers.Count = 1000
	sc.Accounts = scenario.Accounts{Postpaid: 0.2, CreditLimit: 500, PostpaidBalance: 7, Buckets: 0.1, BucketPlan: []string{"sms:3"}}
	plans, initial, err := ShardPlans(&sc, 4, 100)
	if err != nil {
		t.Fatal(err)
	}
	var want []local.Plan
	for _, lo := range []int{0, 250, 500, 750} {
		want = append(want, local.Plan{Offset: lo, Count: 50, Balance: 7, CreditLimit: 500}, local.Plan{Offset: lo + 50, Count: 25, Balance: 100})
	}
	if len(plans) != len(want) || len(initial) != 4 {
		t.Fatalf("%d plans %+v, %d initial states", len(plans), plans, len(initial))
	}
	for i, p := range plans {
		w := want[i]
		if p.Offset != w.Offset || p.Count != w.Count || p.Balance != w.Balance || p.CreditLimit != w.CreditLimit || (len(p.Buckets) == 1) != (w.CreditLimit == 0) {
			t.Fatalf("plan %d: %+v, want %+v", i, p, w)
		}
	}
	for i, f := range initial {
		if a := f(49); a.CreditLimit != 500 || a.Balance != 7 {
			t.Fatalf("shard %d subscriber 49: %+v", i, a)
		}
		if a := f(60); a.Balance != 100 || a.Buckets == [len(a.Buckets)]uint64{} {
			t.Fatalf("shard %d subscriber 60: %+v", i, a)
		}
		if a := f(200); a.Balance != 100 || a.CreditLimit != 0 || a.Buckets != [len(a.Buckets)]uint64{} {
			t.Fatalf("shard %d subscriber 200: %+v", i, a)
		}
	}
	// The whole range as one shard: Plans' own.
	one, _, err := ShardPlans(&sc, 1, 100)
	direct, _, _ := Plans(&sc, 100)
	if err != nil || !reflect.DeepEqual(one, direct) {
		t.Fatalf("one shard %+v, Plans %+v", one, direct)
	}
	sc.Accounts = scenario.Accounts{}
	if p, i, err := ShardPlans(&sc, 4, 100); p != nil || i != nil || err != nil {
		t.Fatalf("without shares: %v %v %v", p, i, err)
	}
}
