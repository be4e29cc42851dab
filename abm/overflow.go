package abm

import (
	"strconv"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/chf/checked"
)

// Money, units and times in an account record stay representable: every
// sum or product of request-supplied values that lands in one is checked
// (chf/checked) before the record changes, and a request that would
// overflow is answered chf.ResultOverflow with nothing changed. What the
// checks keep true, so that the rest of the arithmetic on the record needs
// no check:
//   - balance + creditLimit fits an int64 (top-ups, provisioning), so
//     available() does, and reserved, which grants keep at most
//     balance + creditLimit, does too;
//   - debited, overage and offline plus everything one request may add to
//     them fits (usageOverflows), so debit and the offline totals do;
//   - the units of a service's live buckets fit a uint64 in total (top-ups,
//     provisioning), so bucketAvail, fillBuckets and the units held by
//     reservations, at most the total, do;
//   - bucket expiries are now + validity checked (AddSeconds); reservation
//     and session expiries are now plus a tariff's uint32 seconds or the
//     service's configured limits, far from int64's range.

// topUpSums returns the balance, credited total and bucket expiry after
// top-up t at now, or the field of t whose sum overflows.
func (a *account) topUpSums(t *chf.TopUp, now int64) (bal, cred, exp int64, overflows string) {
	bal, ok := checked.AddI64(a.balance, t.Amount)
	if ok {
		_, ok = checked.AddI64(bal, a.creditLimit)
	}
	if ok {
		cred, ok = checked.AddI64(a.credited, t.Amount)
	}
	if !ok {
		return 0, 0, 0, chf.ParamAmount
	}
	if b := &t.Bucket; b.Units > 0 {
		if _, ok := checked.AddU64(a.bucketTotal(b.Service), b.Units); !ok {
			return 0, 0, 0, chf.ParamBucketUnits
		}
		if b.Expires > 0 {
			if exp, ok = checked.AddSeconds(now, b.Expires); !ok {
				return 0, 0, 0, chf.ParamBucketValidity
			}
		}
	}
	return bal, cred, exp, ""
}

// bucketTotal is the units of service svc in a's buckets (bounded: see
// above).
func (a *account) bucketTotal(svc chf.Service) uint64 {
	var total uint64
	for _, b := range a.buckets {
		if b.svc == svc {
			total += b.units
		}
	}
	return total
}

func topUpOverflowDetail(param string) string {
	switch param {
	case chf.ParamAmount:
		return "amount: the balance, the credited total or the balance plus the credit limit would overflow int64 minor units"
	case chf.ParamBucketUnits:
		return "bucket.units: the service's bucket units would overflow 64 bits in total"
	case chf.ParamBucketValidity:
		return "bucket.validity: now + validity overflows int64 Unix seconds"
	}
	return "a sum overflows"
}

// usageOverflows checks, before anything changes, that the usage req
// reports fits the account's running totals: the request's costs summed
// (online and offline apart) added to debited, overage and offline. When
// it does not, it answers resp with chf.ResultOverflow, the line that
// overflowed marked with it, and returns true.
func usageOverflows(a *account, req *chf.ApplyRequest, resp *chf.ChargeResponse) bool {
	var online, offline int64
	bad := -1
	for i := range req.Lines {
		l := &req.Lines[i]
		if l.Result != chf.ResultSuccess {
			continue
		}
		var ok bool
		if l.Offline {
			if offline, ok = checked.AddI64(offline, l.UsedCost); ok {
				_, ok = checked.AddI64(a.offline, offline)
			}
		} else if online, ok = checked.AddI64(online, l.UsedCost); ok {
			// A debit lands in debited, the rest in overage: each at
			// most online (overNew, a part of overage, then fits too).
			_, ok1 := checked.AddI64(a.debited, online)
			_, ok2 := checked.AddI64(a.overage, online)
			ok = ok1 && ok2
		}
		if !ok || l.UsedCost < 0 {
			bad = i
			break
		}
	}
	if bad < 0 {
		return false
	}
	resp.Result = chf.ResultOverflow
	resp.Detail = "the usage of rating group " + strconv.FormatUint(uint64(req.Lines[bad].RatingGroup), 10) + " would overflow the account's totals"
	for i := range req.Lines {
		g := chf.GrantLine{RatingGroup: req.Lines[i].RatingGroup, Result: req.Lines[i].Result}
		if i == bad {
			g.Result = chf.ResultOverflow
		}
		resp.Lines = append(resp.Lines, g)
	}
	return true
}
