package testbed

import (
	"fmt"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/local"
)

// Plans returns the provisioning plans of a scenario's account shares
// (postpaid, buckets) over its subscriber range, every other account
// holding balance, and the initial state of each subscriber for the
// audit (audit.Input.InitialOf); nil, nil without shares.
func Plans(sc *scenario.Scenario, balance int64) ([]local.Plan, func(i int32) audit.Account, error) {
	a := &sc.Accounts
	if a.Postpaid == 0 && a.Buckets == 0 {
		return nil, nil, nil
	}
	n := sc.Subscribers.Count
	plo, phi := a.PostpaidRange(n)
	blo, bhi := a.BucketRange(n)
	var plans []local.Plan
	if phi > plo {
		plans = append(plans, local.Plan{Offset: plo, Count: phi - plo, Balance: a.PostpaidBalance, CreditLimit: a.CreditLimit})
	}
	var buckets []chf.Bucket
	var units [nchf.NumBucketServices]uint64
	for _, s := range a.BucketPlan {
		b, err := scenario.ParseBucket(s)
		if err != nil {
			return nil, nil, err
		}
		svc := map[string]chf.Service{"data": chf.ServiceData, "voice": chf.ServiceVoice, "sms": chf.ServiceSMS}[b.Service]
		buckets = append(buckets, chf.Bucket{Service: svc, Units: b.Units, Expires: int64(b.Validity.Seconds())})
		k := nchf.BucketService(b.Service)
		if k < 0 {
			return nil, nil, fmt.Errorf("BUG: bucket service %q", b.Service)
		}
		units[k] += b.Units
	}
	if bhi > blo {
		plans = append(plans, local.Plan{Offset: blo, Count: bhi - blo, Balance: balance, Buckets: buckets})
	}
	initial := func(i int32) audit.Account {
		switch {
		case int(i) >= plo && int(i) < phi:
			return audit.Account{Balance: a.PostpaidBalance, CreditLimit: a.CreditLimit, Found: true}
		case int(i) >= blo && int(i) < bhi:
			return audit.Account{Balance: balance, Buckets: units, Found: true}
		}
		return audit.Account{Balance: balance, Found: true}
	}
	return plans, initial, nil
}

// ShardPlans returns the plans of a scenario run as n shards, each over
// its own slice of the range (scenario.Shard(*full, i, n); a sweep's
// steps): every shard holds the scenario's postpaid and bucket shares of
// its own subscribers, so each has the scenario's shape. The plans'
// offsets are from full's first subscriber (the range provisioned);
// initial[i] is shard i's audit initial state, by index from its own
// first. nil, nil without shares.
func ShardPlans(full *scenario.Scenario, n int, balance int64) (plans []local.Plan, initial []func(i int32) audit.Account, err error) {
	a := &full.Accounts
	if a.Postpaid == 0 && a.Buckets == 0 {
		return nil, nil, nil
	}
	f0, err := scenario.ParseSUPI(full.Subscribers.First)
	if err != nil {
		return nil, nil, err
	}
	initial = make([]func(int32) audit.Account, n)
	for i := range n {
		sh := scenario.Shard(*full, i, n)
		fi, err := scenario.ParseSUPI(sh.Subscribers.First)
		if err != nil {
			return nil, nil, err
		}
		p, init, err := Plans(&sh, balance)
		if err != nil {
			return nil, nil, err
		}
		for _, pl := range p {
			pl.Offset += int(fi.Number - f0.Number)
			plans = append(plans, pl)
		}
		initial[i] = init
	}
	return plans, initial, nil
}
