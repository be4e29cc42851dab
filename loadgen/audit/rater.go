package audit

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/tariff"
)

// The audit rates what the load generator sent on its own, from the tariff
// file the OCP loads (or the built-in default), so that a CHF that charges
// wrongly and reports what it charged is still caught. It shares no rating
// code with the OCP: only the file format, read and validated by package
// tariff (ocp/README.md), and the rule, which is
//
//	cost of N base units = ceil(N × price / unit), once per rating group
//	per request, unit = 1,000,000 octets for data, 1 s for voice, 1 event
//	for sms; data is the container's totalVolume, else uplink + downlink.
//
// An event charges its used units, else the requested ones, else the
// rating group's defaultGrant (capped by maxGrant).

// Tariff is a tariff as the audit reads it. It is immutable and safe for
// concurrent use.
type Tariff struct {
	rates map[uint32]auditRate
}

type auditRate struct {
	service      string // data, voice, sms
	price        int64
	unit         uint64
	defaultGrant uint64
	maxGrant     uint64
}

// LoadTariff reads a YAML or JSON tariff file, the one the OCP loads
// (`chf ocp --tariff`); an empty path is the built-in default tariff.
func LoadTariff(path string) (*Tariff, error) {
	if path == "" {
		return ParseTariff([]byte(tariff.DefaultFile))
	}
	b, err := readfile.Read(path, tariff.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read tariff: %w", err)
	}
	t, err := ParseTariff(b)
	if err != nil {
		return nil, fmt.Errorf("cannot load tariff %s: %w", path, err)
	}
	return t, nil
}

// ParseTariff decodes and validates a tariff as the OCP does (package
// tariff: unknown fields and the values the OCP refuses are errors naming
// the field, wrapping tariff.ErrInvalid) and keeps what the audit rates
// with.
func ParseTariff(b []byte) (*Tariff, error) {
	f, err := tariff.Parse(b)
	if err != nil {
		return nil, err
	}
	t := &Tariff{rates: make(map[uint32]auditRate, len(f.RatingGroups))}
	for i, g := range f.RatingGroups {
		r := auditRate{service: strings.ToLower(g.Service), price: g.Price, defaultGrant: g.DefaultGrant, maxGrant: g.MaxGrant}
		switch r.service {
		case "data":
			r.unit = 1_000_000
		case "voice", "sms":
			r.unit = 1
		default:
			return nil, fmt.Errorf("BUG: audit: ratingGroups[%d].service %q passed validation", i, g.Service)
		}
		t.rates[g.RatingGroup] = r
	}
	return t, nil
}

// Rate returns what the CHF must debit for c, in minor units: its usage
// rated on the tariff (0 for a rating group the tariff lacks, which the
// CHF refuses with RATING_FAILED, and for balance inquiries). It
// implements the load engine's Rater. Allocation-free.
func (t *Tariff) Rate(c *driver.Charge) int64 {
	r, ok := t.rates[c.RatingGroup]
	if !ok {
		return 0
	}
	switch c.Op {
	case driver.ChargeCreate, driver.ChargeUpdate, driver.ChargeRelease:
		return r.cost(r.amount(c.Used))
	case driver.ChargeEvent:
		n := r.amount(c.Used)
		if n == 0 {
			n = r.amount(c.Requested)
			if n == 0 {
				n = r.defaultGrant
			} else if r.maxGrant != 0 && n > r.maxGrant {
				n = r.maxGrant
			}
		}
		return r.cost(n)
	}
	return 0
}

// amount is the quantity of u this rate charges for.
func (r auditRate) amount(u chf.Units) uint64 {
	switch r.service {
	case "data":
		if u.TotalVolume != 0 {
			return u.TotalVolume
		}
		return u.UplinkVolume + u.DownlinkVolume
	case "voice":
		return uint64(u.Time)
	}
	return u.ServiceSpecific
}

// cost is ceil(n × price / unit) minor units, saturating.
func (r auditRate) cost(n uint64) int64 {
	if n == 0 || r.price <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(n, uint64(r.price))
	if hi >= r.unit {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, r.unit)
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// bucketValue returns what the bucket units consumed between start and
// fin are worth at the tariff's price of their service, and whether that
// is exact: it is for a service priced per unit (voice seconds, sms), not
// for one priced per block (data per 1,000,000 octets, where the money
// paid depends on how each charge was split between bucket and balance),
// nor for a service with several prices.
func (t *Tariff) bucketValue(start, fin *Account) (int64, bool) {
	var v int64
	exact := true
	for k := range start.Buckets {
		if fin.Buckets[k] >= start.Buckets[k] {
			continue
		}
		used := start.Buckets[k] - fin.Buckets[k]
		price, unit, ok := t.servicePrice(bucketServiceNames[k])
		if !ok || unit != 1 {
			exact = false
			continue
		}
		v += price * int64(used)
	}
	return v, exact
}

var bucketServiceNames = [...]string{nchf.BucketData: "data", nchf.BucketVoice: "voice", nchf.BucketSMS: "sms"}

// servicePrice returns the price and unit of a service's rating groups;
// false when none has it or they disagree.
func (t *Tariff) servicePrice(svc string) (price int64, unit uint64, ok bool) {
	for _, r := range t.rates {
		if r.service != svc {
			continue
		}
		if ok && (r.price != price || r.unit != unit) {
			return 0, 0, false
		}
		price, unit, ok = r.price, r.unit, true
	}
	return price, unit, ok
}
