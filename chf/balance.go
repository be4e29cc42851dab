package chf

import (
	"math"
	"math/bits"

	"github.com/chf-testbed/testbed/chf/checked"
)

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file balance.go -o balance_gen.go -tests=false

// RatedLine is one rating group of a ChargeRequest after the OCP rated it:
// what to debit for the reported usage and what grant to reserve, in the
// service's base units (octets, seconds or events) and in minor units.
//
// The cost of N units is ceil(N * Price / UnitSize) minor units (see
// Cost); the ABM uses Price and UnitSize to shrink a grant to what the
// available balance covers.
type RatedLine struct {
	RatingGroup uint32  `msg:"rg"`
	Service     Service `msg:"sv"`
	// Result is ResultRatingFailed when the OCP has no tariff for the
	// rating group; the ABM then leaves the line alone and echoes it.
	Result Result `msg:"r"`
	// UsedUnits is the reported usage in base units; UsedCost its price.
	UsedUnits uint64 `msg:"uu"`
	UsedCost  int64  `msg:"uc"`
	// Request is true when a grant of GrantUnits base units is wanted.
	Request    bool   `msg:"rq"`
	GrantUnits uint64 `msg:"gu"`
	// Price is the minor units charged per UnitSize base units.
	Price    int64  `msg:"p"`
	UnitSize uint64 `msg:"us"`
	// ValidityTime and QuotaHoldingTime (seconds) are answered with the
	// grant; the reservation expires after ValidityTime (QuotaHoldingTime
	// when ValidityTime is zero).
	ValidityTime     uint32 `msg:"vt"`
	QuotaHoldingTime uint32 `msg:"qht"`
	// Offline: the usage is reported for offline charging (see
	// UsageLine.Offline). The ABM charges it by the method of the
	// session's grant when the rating group holds one (online: debited),
	// else records it as offline usage.
	Offline bool `msg:"of"`
	// AfterDelivery marks a one-time event line charged after delivery
	// (PEC, see EventType): debited as far as the balance goes, the rest
	// recorded as overage. Without it an event line is charged before
	// delivery (IEC): in full or refused.
	AfterDelivery bool `msg:"ad"`
}

// ApplyRequest is one charging event the OCP hands the ABM: a ChargeRequest
// with its lines rated. The ABM applies it to the account record in one
// atomic read-modify-write and answers a ChargeResponse.
type ApplyRequest struct {
	Op      Op          `msg:"op"`
	SUPI    string      `msg:"s"`
	Session string      `msg:"sn"`
	Seq     uint32      `msg:"q"`
	Lines   []RatedLine `msg:"l"`
	// Key is the ChargeRequest's; Digest is its ChargeRequest.Digest. The
	// ABM answers a repeated request from the record when both match
	// with the operation (see abm/README.md, Retransmissions).
	Key    uint64 `msg:"k"`
	Digest uint64 `msg:"dg"`
	// TopUp is what an OpTopUp credits.
	TopUp TopUp `msg:"tu"`
	// Notify is the create's notifyUri (ChargeRequest.Notify).
	Notify []byte `msg:"nu"`
	// Epoch identifies the tariff the OCP rated the request with (a
	// digest of its rates, never 0; 0 = none, for unrated operations).
	// The ABM keeps it in the account record and re-authorises the
	// account's open sessions once it sees a newer one (abm/README.md,
	// Notifications).
	Epoch uint32 `msg:"te"`
}

// Reset clears r for reuse, keeping the capacity of Lines.
func (r *ApplyRequest) Reset() {
	*r = ApplyRequest{Lines: r.Lines[:0], Notify: r.Notify[:0]}
}

// Cost returns the price of n base units at price minor units per unitSize
// units, rounded up to the next minor unit: ceil(n * price / unitSize). It
// saturates at math.MaxInt64 instead of overflowing. A zero unitSize is
// treated as 1; a non-positive price costs nothing.
func Cost(n uint64, price int64, unitSize uint64) int64 {
	c, ok := CheckedCost(n, price, unitSize)
	if !ok {
		return math.MaxInt64
	}
	return c
}

// CheckedCost is Cost without saturation: false when the price of n units
// does not fit an int64 (the OCP refuses such usage with ResultOverflow).
func CheckedCost(n uint64, price int64, unitSize uint64) (int64, bool) {
	if n == 0 || price <= 0 {
		return 0, true
	}
	if unitSize == 0 {
		unitSize = 1
	}
	q, ok := checked.MulDivUp(n, uint64(price), unitSize)
	if !ok || q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// Covered returns the largest number of base units whose Cost is at most
// amount minor units: floor(amount * unitSize / price). With a
// non-positive price everything is covered (math.MaxUint64).
func Covered(amount int64, price int64, unitSize uint64) uint64 {
	if price <= 0 {
		return math.MaxUint64
	}
	if amount <= 0 {
		return 0
	}
	if unitSize == 0 {
		unitSize = 1
	}
	hi, lo := bits.Mul64(uint64(amount), unitSize)
	if hi >= uint64(price) {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, uint64(price))
	return q
}

// Add adds one reported container c to u, counting vol as its volume
// (c's totalVolume when it has one, else its uplink + downlink: the fronts
// decide per container, so a line mixing both kinds of containers counts
// each as reported). It reports false when a sum would overflow.
func (u *Units) Add(c Units, vol uint64) bool {
	t, ok1 := checked.AddU32(u.Time, c.Time)
	tv, ok2 := checked.AddU64(u.TotalVolume, vol)
	uv, ok3 := checked.AddU64(u.UplinkVolume, c.UplinkVolume)
	dv, ok4 := checked.AddU64(u.DownlinkVolume, c.DownlinkVolume)
	ss, ok5 := checked.AddU64(u.ServiceSpecific, c.ServiceSpecific)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return false
	}
	*u = Units{Time: t, TotalVolume: tv, UplinkVolume: uv, DownlinkVolume: dv, ServiceSpecific: ss}
	return true
}

// Volume is the volume one reported container or requested unit counts:
// its totalVolume when it has one (hasTotal), else uplink + downlink;
// false when that sum overflows (the fronts refuse it naming the unit).
func (u *Units) Volume(hasTotal bool) (uint64, bool) {
	if hasTotal {
		return u.TotalVolume, true
	}
	return checked.AddU64(u.UplinkVolume, u.DownlinkVolume)
}

// Amount returns the quantity of u that service s is rated on: total volume
// (or uplink plus downlink when no total is given) for data, time for
// voice, service-specific units for SMS. Fronts fill TotalVolume with
// the per-container volumes (see Add), so a sum is never counted twice.
func (u Units) Amount(s Service) uint64 {
	switch s {
	case ServiceData:
		if u.TotalVolume != 0 {
			return u.TotalVolume
		}
		// The fronts refuse a unit whose uplink + downlink overflows
		// (Volume); saturated rather than wrapped should one get here.
		v, ok := checked.AddU64(u.UplinkVolume, u.DownlinkVolume)
		if !ok {
			return math.MaxUint64
		}
		return v
	case ServiceVoice:
		return uint64(u.Time)
	case ServiceSMS:
		return u.ServiceSpecific
	}
	return 0
}

// UnitsOf returns n base units of service s as Units (total volume, time
// or service-specific units). Time saturates at math.MaxUint32.
func UnitsOf(s Service, n uint64) Units {
	switch s {
	case ServiceData:
		return Units{TotalVolume: n}
	case ServiceVoice:
		if n > math.MaxUint32 {
			n = math.MaxUint32
		}
		return Units{Time: uint32(n)}
	case ServiceSMS:
		return Units{ServiceSpecific: n}
	}
	return Units{}
}
