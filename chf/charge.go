// Package chf is the charging domain every service shares: the internal
// request and response types the fronts (Nchf in cgw, Diameter Gy in
// cgw/diameter) hand the charging core (ocp, then abm), units, rating
// groups and result codes. The Nchf JSON data model of TS 32.291 lives
// beside it in this package too.
//
// Money is always int64 minor units (cents); never floats.
package chf

import "context"

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file charge.go -o charge_gen.go -tests=false

// Service is what a rating group charges for.
type Service uint8

const (
	ServiceUnknown Service = 0
	ServiceData    Service = 1 // priced per megabyte of total volume
	ServiceVoice   Service = 2 // priced per second of time
	ServiceSMS     Service = 3 // priced per event (service-specific unit)
)

// Op is the kind of a charging request.
type Op uint8

const (
	OpCreate  Op = 1 // session create: initial quota per rating group
	OpUpdate  Op = 2 // session update: report used units, request more
	OpRelease Op = 3 // session release: final usage, frees reservations
	OpEvent   Op = 4 // one-time event (SMS): immediate debit, no session
	OpBalance Op = 5 // balance inquiry: no charging
	OpTopUp   Op = 6 // operator top-up: credit money and/or a bucket
	// OpSessions lists the account's open sessions with their notify
	// URIs (the operator's reauthorize/abort); no charging, no write.
	OpSessions Op = 7
	// OpAbortSessions lists them as OpSessions does and bars each from
	// further charging (the operator's abort): an update of an aborted
	// session is refused with ResultEndUserServiceDenied; its release
	// still reports the final usage and frees its reservations. It also
	// bars the account: a create or an event is refused with
	// ResultEndUserServiceDenied (nothing charged) until OpUnbar.
	OpAbortSessions Op = 8
	// OpUnbar lifts the bar OpAbortSessions put on the account (the
	// operator's unbar); a top-up does not.
	OpUnbar Op = 9
)

// OpNotifications takes pending CHF-initiated notifications from the
// ABM: open sessions its reservation sweep found granted under an older
// tariff or holding units of an expired bucket (abm/README.md,
// Notifications). No subscriber; answered in ChargeResponse.Targets, at
// most NotificationsMax per call. The CGW polls it and sends each target
// a REAUTHORIZATION (Gy: RAR).
const OpNotifications Op = 10

// NotificationsMax bounds the targets one OpNotifications answers.
const NotificationsMax = 256

// NotifyTarget is an open session of an account and the notifyUri its
// create named (answered to OpSessions and OpNotifications).
type NotifyTarget struct {
	Session string `msg:"sn"`
	URI     string `msg:"u"`
}

// Result is the outcome of a whole request or of one rating group.
// The fronts map it onto Nchf HTTP status/ProblemDetails/resultCode and
// Diameter Result-Code.
type Result uint8

const (
	ResultSuccess              Result = 0
	ResultQuotaLimitReached    Result = 1 // balance exhausted: Nchf QUOTA_LIMIT_REACHED, Diameter 4012
	ResultEndUserServiceDenied Result = 2 // account barred/unknown service: END_USER_SERVICE_DENIED
	ResultUserUnknown          Result = 3 // no such subscriber: USER_UNKNOWN, Diameter 5030
	ResultRatingFailed         Result = 4 // no tariff for the rating group: RATING_FAILED, Diameter 5031
	ResultSessionUnknown       Result = 5 // unknown ChargingDataRef / Session-Id: 404, Diameter 5002
	ResultStaleSequence        Result = 6 // invocationSequenceNumber older than the last one answered
	ResultInvalid              Result = 7 // the request is semantically invalid (Detail says why)
	ResultOverloaded           Result = 8 // shed load: Nchf 503, Diameter 3004
	// ResultSequenceReused: the Seq was last answered for another
	// operation (an update's number reused by a release): Nchf 400 naming
	// invocationSequenceNumber, Diameter 5004 with CC-Request-Number.
	ResultSequenceReused Result = 9
	// ResultReplayMismatch: a request repeating the identity of one
	// already answered (same Seq on the session, or same create/event
	// identity) with different content: Nchf 400 naming
	// multipleUnitUsage, Diameter 5004.
	ResultReplayMismatch Result = 10
	// ResultOverflow: a sum or product of the request's money, units or
	// times does not fit its integer type (chf/checked); nothing was
	// changed. The lines whose usage overflowed carry it as their Result
	// (Nchf 400 naming the line's usedUnitContainer, Diameter 5004 with
	// its Used-Service-Unit as Failed-AVP); a top-up names the field in
	// ChargeResponse.Param (operator API 400 naming it).
	ResultOverflow Result = 11
)

// The operator API fields of a top-up a ResultOverflow names in
// ChargeResponse.Param (JSON pointers into its body).
const (
	ParamAmount         = "/amount"          // balance, credited or balance + credit limit
	ParamBucketUnits    = "/bucket/units"    // the service's bucket units in total
	ParamBucketValidity = "/bucket/validity" // now + validity as Unix seconds
)

// Units mirrors Nchf ServiceUnit and Diameter *-Service-Unit. Zero fields
// are absent.
type Units struct {
	Time            uint32 `msg:"t"`  // seconds
	TotalVolume     uint64 `msg:"tv"` // octets
	UplinkVolume    uint64 `msg:"uv"` // octets
	DownlinkVolume  uint64 `msg:"dv"` // octets
	ServiceSpecific uint64 `msg:"ss"` // events
}

// Digest returns a content digest of the request's operation and lines
// (a top-up's amount and bucket) (FNV-1a over their fields): a replay
// must repeat it. Allocation-free.
func (r *ChargeRequest) Digest() uint64 {
	h := HashUint(hashOffset, uint64(r.Op))
	if r.Event != EventUnspecified {
		// Folded in only when set, so that digests kept in account
		// records before the field existed still match.
		h = HashUint(h, 16+uint64(r.Event))
	}
	if r.Op == OpTopUp {
		t := &r.TopUp
		h = HashUint(h, uint64(t.Amount))
		h = HashUint(h, uint64(t.Bucket.Service))
		h = HashUint(h, t.Bucket.Units)
		return HashUint(h, uint64(t.Bucket.Expires))
	}
	for i := range r.Lines {
		l := &r.Lines[i]
		h = HashUint(h, uint64(l.RatingGroup))
		h = l.Used.hash(h)
		if l.Offline {
			h = HashUint(h, 2)
		}
		if l.Request {
			h = HashUint(h, 1)
			h = l.Requested.hash(h)
		} else {
			h = HashUint(h, 0)
		}
	}
	return h
}

func (u *Units) hash(h uint64) uint64 {
	h = HashUint(h, uint64(u.Time))
	h = HashUint(h, u.TotalVolume)
	h = HashUint(h, u.UplinkVolume)
	h = HashUint(h, u.DownlinkVolume)
	return HashUint(h, u.ServiceSpecific)
}

const (
	hashOffset = 14695981039346656037
	hashPrime  = 1099511628211
)

// HashSeed is the FNV-1a 64 offset basis to start Hash and HashUint from.
const HashSeed uint64 = hashOffset

// Hash folds b into the FNV-1a 64 hash h (start from HashSeed). Unlike
// hash/maphash it is the same in every process, so every CGW instance
// derives the same identity for the same request.
func Hash(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= hashPrime
	}
	return h
}

// HashString is Hash for a string.
func HashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= hashPrime
	}
	return h
}

// HashUint folds the 8 bytes of v into h.
func HashUint(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= hashPrime
		v >>= 8
	}
	return h
}

// IsZero reports whether no unit is set.
func (u Units) IsZero() bool { return u == Units{} }

// UsageLine is one rating group of a request: usage to charge and/or
// quota wanted.
type UsageLine struct {
	RatingGroup uint32 `msg:"rg"`
	Used        Units  `msg:"u"` // zero when nothing is reported
	// Request is true when the client wants (more) quota for the group.
	Request bool `msg:"r"`
	// Requested is the amount wanted; zero means the CHF picks the grant.
	Requested Units `msg:"q"`
	// Reported is the set of triggers the client reported the usage for
	// (Nchf usedUnitContainer triggers, Gy Reporting-Reason). A line
	// reporting TriggerFinal closes the rating group: no new grant.
	Reported Triggers `msg:"rp"`
	// Offline is set when the usage is reported for offline charging
	// (Nchf quotaManagementIndicator OFFLINE_CHARGING): rated and recorded,
	// never taken from the balance, and no quota is granted.
	Offline bool `msg:"of"`
}

// Bucket is an allowance of one service's base units (octets, seconds,
// events) consumed before the monetary balance, until it expires.
type Bucket struct {
	Service Service `msg:"sv"`
	Units   uint64  `msg:"u"` // base units left
	Expires int64   `msg:"x"` // unix seconds; 0 = never
	Held    uint64  `msg:"h"` // units held by reservations (answers only)
}

// Triggers is a set of Nchf trigger types (TS 32.291 TriggerType) as bits;
// the quota-management ones, which a grant arms and a usage report names.
type Triggers uint16

// The trigger types the CHF arms in grants and acts on in usage reports.
const (
	TriggerQuotaThreshold Triggers = 1 << iota // QUOTA_THRESHOLD / Gy THRESHOLD
	TriggerQHT                                 // QHT: quota holding time expired
	TriggerFinal                               // FINAL: the rating group is closed
	TriggerQuotaExhausted                      // QUOTA_EXHAUSTED
	TriggerValidityTime                        // VALIDITY_TIME
	TriggerForcedReauth                        // FORCED_REAUTHORISATION
	TriggerOther                               // any other trigger type (not acted on)
)

// triggerNames are the Nchf names of the trigger bits, in bit order.
var triggerNames = [...]string{"QUOTA_THRESHOLD", "QHT", "FINAL", "QUOTA_EXHAUSTED", "VALIDITY_TIME", "FORCED_REAUTHORISATION"}

// ParseTrigger returns the bit of the Nchf trigger type name (TriggerOther
// for a name the CHF does not act on).
func ParseTrigger(name []byte) Triggers {
	for i, n := range triggerNames {
		if string(name) == n {
			return 1 << i
		}
	}
	return TriggerOther
}

// TriggerName returns the Nchf name of a single trigger bit ("" for none
// or TriggerOther).
func TriggerName(t Triggers) string {
	for i, n := range triggerNames {
		if t == 1<<i {
			return n
		}
	}
	return ""
}

// FinalAction is a Final-Unit-Action (Nchf finalUnitAction).
type FinalAction uint8

const (
	FinalTerminate      FinalAction = 0 // TERMINATE (Diameter 0)
	FinalRedirect       FinalAction = 1 // REDIRECT (Diameter 1), to Redirect
	FinalRestrictAccess FinalAction = 2 // RESTRICT_ACCESS (Diameter 2), FilterID applied
)

// RedirectType is an Nchf RedirectAddressType / Diameter
// Redirect-Address-Type.
type RedirectType uint8

const (
	RedirectIPv4 RedirectType = 0 // IPV4 (Diameter 0)
	RedirectIPv6 RedirectType = 1 // IPV6 (Diameter 1)
	RedirectURL  RedirectType = 2 // URL (Diameter 2)
	RedirectURI  RedirectType = 3 // URI (Diameter SIP_URI, 3)
)

// ChargeRequest is what a front hands the charging core.
type ChargeRequest struct {
	Op   Op     `msg:"op"`
	SUPI string `msg:"s"` // "imsi-001010000000001"; also the account key
	// Session identifies the charging session inside the account (opaque,
	// at most 64 bytes): for Nchf the random part of the ChargingDataRef,
	// for Gy derived from the Session-Id. Empty for OpBalance.
	Session string `msg:"sn"`
	// Seq is the invocationSequenceNumber / CC-Request-Number. A request
	// repeated with the Seq last answered returns that answer again and
	// charges once; an older Seq is refused with ResultStaleSequence.
	Seq   uint32      `msg:"q"`
	Lines []UsageLine `msg:"l"`
	// Key identifies a create or event across transmissions (Nchf: the
	// consumer, subscriber, invocationSequenceNumber and
	// invocationTimeStamp hashed, see NchfRequest.Key); 0 when the front
	// has none (Gy: the Session-Id already identifies it). Only the exact
	// identity (Key, operation and Digest) answers a repeat: a flagged
	// retransmission (Nchf retransmissionIndicator, the Diameter T flag)
	// with another identity is a new request. For a top-up it is the
	// operator's idempotency key hashed (0: none).
	Key uint64 `msg:"k"`
	// Event says how an OpEvent is charged (Nchf oneTimeEventType):
	// before delivery (IEC, refused when the account cannot cover it) or
	// after it (PEC, debited with overage beyond the balance). See
	// EventType.
	Event EventType `msg:"ev"`
	// TopUp is what an OpTopUp credits.
	TopUp TopUp `msg:"tu"`
	// Notify is a create's notifyUri (empty: none), kept with the session
	// for CHF-initiated notifications.
	Notify []byte `msg:"nu"`
}

// EventType is how a one-time event (OpEvent) is charged, TS 32.290
// event charging: immediate event charging (IEC), where the CHF charges
// before the service is delivered and may refuse it, or event charging
// after delivery (PEC), where the service was delivered and its usage is
// reported.
type EventType uint8

const (
	// EventUnspecified (no oneTimeEventType; Gy CCR-E): a line reporting
	// used units is charged after delivery (PEC), a line requesting
	// units only before it (IEC).
	EventUnspecified EventType = 0
	// EventIEC: every line is charged before delivery: in full, or
	// refused with ResultQuotaLimitReached and nothing charged.
	EventIEC EventType = 1
	// EventPEC: every line was delivered: its units (used, else
	// requested) are debited as far as the balance goes and the rest is
	// recorded as overage; never refused for want of credit.
	EventPEC EventType = 2
)

// AfterDelivery reports whether a one-time event line under event type
// e is charged after delivery (PEC): always for EventPEC, never for
// EventIEC, and for EventUnspecified when it reports used units.
func (e EventType) AfterDelivery(l *UsageLine) bool {
	switch e {
	case EventPEC:
		return true
	case EventIEC:
		return false
	}
	return !l.Used.IsZero()
}

// TopUp is an operator top-up: Amount minor units onto the balance and,
// when Bucket.Units is set, a bucket (Bucket.Expires is then a validity in
// seconds from now, 0 = none).
type TopUp struct {
	Amount int64  `msg:"a"`
	Bucket Bucket `msg:"b"`
}

// Reset empties r, keeping the capacity of Lines.
func (r *ChargeRequest) Reset() {
	*r = ChargeRequest{Lines: r.Lines[:0], Notify: r.Notify[:0]}
}

// GrantLine is the answer for one rating group.
type GrantLine struct {
	RatingGroup      uint32 `msg:"rg"`
	Result           Result `msg:"r"`
	Granted          Units  `msg:"g"`
	ValidityTime     uint32 `msg:"vt"`  // seconds
	QuotaHoldingTime uint32 `msg:"qht"` // seconds
	// FinalUnit is set when the balance cannot cover another grant after
	// this one: the client must apply FinalAction when it is used.
	FinalUnit bool `msg:"f"`
	// The rest is filled by the OCP from the tariff after the ABM answered
	// (it is not kept in the account record: a replayed answer is filled
	// again). Threshold is the remaining-quota threshold in the grant's
	// base units (Nchf volume/time/unitQuotaThreshold, Gy
	// *-Quota-Threshold), Triggers the triggers armed with the grant.
	Threshold uint64   `msg:"th"`
	Triggers  Triggers `msg:"tg"`
	// FinalAction, with FinalUnit, is what to do when the final units are
	// used: Redirect (of RedirectType) for FinalRedirect, FilterID for
	// FinalRestrictAccess.
	FinalAction  FinalAction  `msg:"fa"`
	RedirectType RedirectType `msg:"rt"`
	Redirect     string       `msg:"ra"`
	FilterID     string       `msg:"fi"`
}

// ChargeResponse is what the charging core answers.
type ChargeResponse struct {
	Result Result `msg:"r"`
	Detail string `msg:"d"` // human-readable reason when Result != Success
	// Param is the request field a ResultOverflow of a top-up names (one
	// of ParamAmount, ParamBucketUnits, ParamBucketValidity).
	Param string      `msg:"pa"`
	Lines []GrantLine `msg:"l"`
	// Charged is what this request debited from the balance, in minor
	// units. A repeated request answered from the record (Replayed) reports
	// what its first transmission debited, charging nothing again. The
	// fronts report it so a load generator can reconcile balances.
	Charged int64 `msg:"c"`
	// Replayed is set when the answer is a repeat of one already given
	// (a retransmission or a retry with the same identity, answered from
	// the account record): its Charged and Lines are the first answer's and
	// nothing was debited or reserved again. Recorders (CDRs) and counters
	// must not count it a second time.
	Replayed bool `msg:"rp"`
	// Balance is filled for OpBalance (and after every charge, as it
	// stands after the request).
	Balance  int64  `msg:"b"` // minor units, reservations not subtracted
	Reserved int64  `msg:"rs"`
	Currency string `msg:"cu"`
	// Debited is the account's running total of every debit, for audits.
	Debited int64 `msg:"db"`
	// Overage is the account's running total of usage reported beyond
	// what the balance could pay (minor units, never debited, kept for
	// billing and audits): Debited + Overage is all usage ever rated.
	Overage int64 `msg:"ov"`
	// Session is set only when a repeated create is answered from the
	// record: the session the first transmission opened (its Location).
	Session string `msg:"sn"`
	// Offline is what this request rated for offline usage (recorded in
	// OfflineTotal, never debited); OfflineTotal the account's running
	// total of it, Credited its running total of top-ups. Debited +
	// Overage + OfflineTotal is all usage ever rated, in minor units.
	Offline      int64 `msg:"of"`
	OfflineTotal int64 `msg:"ot"`
	Credited     int64 `msg:"cr"`
	// CreditLimit > 0 makes a postpaid account: its balance may go below
	// zero down to -CreditLimit.
	CreditLimit int64 `msg:"cl"`
	// Buckets are the account's live allowances (answered to OpBalance
	// and OpTopUp only).
	Buckets []Bucket `msg:"bk"`
	// Targets are the account's open sessions (answered to OpSessions).
	Targets []NotifyTarget `msg:"tg"`
	// Barred is set while the operator's abort bars the account (until
	// OpUnbar): it takes no create and no event.
	Barred bool `msg:"ba"`
}

// Charger is the charging core as the fronts see it. The OCP's client
// (over the chassis) and the OCP itself (in process) implement it.
type Charger interface {
	// Charge runs one request and fills resp. A non-nil error means the
	// core could not be reached or failed (the fronts answer 5xx / Diameter
	// 3004 or 5012); business outcomes are in resp.Result. req and resp are
	// owned by the caller; implementations must not keep them.
	Charge(ctx context.Context, req *ChargeRequest, resp *ChargeResponse) error
}
