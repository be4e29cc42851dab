package audit

import "slices"

// Rating is one rating group of a Tariff as the audit reads it: what
// other independent checkers (loadgen/moneycheck) need to rate and to
// size grants without the OCP's code.
type Rating struct {
	Service      string // data, voice or sms
	Price        int64  // minor units per Unit base units
	Unit         uint64 // 1,000,000 octets for data, 1 second or 1 event otherwise
	DefaultGrant uint64 // base units granted when none are requested
	MaxGrant     uint64 // cap on a requested amount; 0 = none
}

// Rating returns the rate of rating group rg, false when the tariff has
// none.
func (t *Tariff) Rating(rg uint32) (Rating, bool) {
	r, ok := t.rates[rg]
	if !ok {
		return Rating{}, false
	}
	return Rating{Service: r.service, Price: r.price, Unit: r.unit, DefaultGrant: r.defaultGrant, MaxGrant: r.maxGrant}, true
}

// RatingGroups returns the tariff's rating groups in ascending order.
func (t *Tariff) RatingGroups() []uint32 {
	out := make([]uint32, 0, len(t.rates))
	for rg := range t.rates {
		out = append(out, rg)
	}
	slices.Sort(out)
	return out
}

// Cost is the audit's rounding rule for n base units: ceil(n × Price /
// Unit) minor units, saturating.
func (r Rating) Cost(n uint64) int64 {
	return auditRate{service: r.Service, price: r.Price, unit: r.Unit}.cost(n)
}
