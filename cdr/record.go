// Package cdr writes CHF charging data records: TS 32.298 CHFRecord
// (ChargingRecord) in ASN.1 BER, encoded by hand with an append API, to
// rotating files, with partial records on long sessions. See README.md.
package cdr

import (
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chf"
)

// Cause is CauseForRecClosing (TS 32.298 GenericChargingDataTypes).
type Cause int64

const (
	CauseNormalRelease          Cause = 0  // the session was released, or a one-time event
	CausePartialRecord          Cause = 1  // a replay record of a session's create or update
	CauseVolumeLimit            Cause = 16 // partial record: --cdr-partial-volume reached
	CauseTimeLimit              Cause = 17 // partial record: --cdr-partial-time reached
	CauseMaxChangeCond          Cause = 19 // partial record: --cdr-partial-containers reached
	CauseManagementIntervention Cause = 20 // partial record: the service stopped with the session open
)

// Functionality is NetworkFunctionality (the consumer's kind).
type Functionality int64

const (
	FunctionalitySMF  Functionality = 1
	FunctionalitySMSF Functionality = 3
)

// Subscription identifier types (SubscriptionIDType).
const (
	subscriptionE164 = 0
	subscriptionIMSI = 1
	subscriptionNAI  = 3
	subscriptionPriv = 4
)

// RecordTypeCHF is the RecordType of a ChargingRecord
// (chargingFunctionRecord).
const RecordTypeCHF = 200

// ChargedOID identifies the record extension (recordExtensions, a
// ManagementExtension) carrying what the record's requests debited:
// information is SEQUENCE { chargedAmount INTEGER (minor units),
// currency UTF8String OPTIONAL }. TS 32.298's ChargingRecord has no
// monetary field; the arc is a placeholder under the private enterprise
// tree, to be replaced by an operator's own number.
const ChargedOID = "1.3.6.1.4.1.99999.32298.1"

var chargedOID = encodeOID(ChargedOID)

// ReplayOID identifies the record extension marking a replay record:
// information is SEQUENCE { localSequenceNumber INTEGER }, the
// invocationSequenceNumber of the one request the record holds. A
// replay record holds a request answered as a replay (its first answer
// reached no recorder, as far as this one knows: an answer lost between
// the ABM and an OCP, an OCP gone); a collector keeps it only when no
// other record holds that request (see README.md, Replays). Same
// placeholder arc as ChargedOID.
const ReplayOID = "1.3.6.1.4.1.99999.32298.2"

var replayOID = encodeOID(ReplayOID)

// Usage is one used-unit container: the units one request reported for
// a rating group (TS 32.298 UsedUnitContainer inside MultipleUnitUsage).
type Usage struct {
	RatingGroup uint32
	Service     chf.Service // which unit Units counts: octets, seconds, events
	Units       uint64
	Seq         uint32    // the request's invocationSequenceNumber (localSequenceNumber)
	At          time.Time // when the request was charged (triggerTimeStamp)
}

// Record is the subset of ChargingRecord the CHF fills.
type Record struct {
	Node     string        // recordingNetworkFunctionID
	SUPI     string        // subscriberIdentifier
	Consumer Functionality // nFunctionConsumerInformation.networkFunctionality
	Session  string        // chargingSessionIdentifier
	// EventKey, when Session is empty, is written as the
	// chargingSessionIdentifier "ev-" + 16 hex digits: the identity of an
	// event that has no session (Nchf), the same on every transmission.
	EventKey uint64
	Opened   time.Time     // recordOpeningTime
	Duration time.Duration // duration (whole seconds)
	// Sequence is recordSequenceNumber: 1, 2, ... over the records this
	// writer emits for one session (partial records link by it).
	Sequence uint32
	Cause    Cause
	// LocalSequence is localRecordSequenceNumber, assigned by the Writer:
	// 1, 2, ... over every record of one writer, so a collector sees a
	// gap or a repeat.
	LocalSequence uint64
	Usage         []Usage
	Charged       int64 // minor units debited by the requests in the record
	Currency      string
	// Replay marks a replay record (ReplayOID): it holds one request,
	// answered as a replay, whose invocationSequenceNumber is ReplaySeq.
	Replay    bool
	ReplaySeq uint32
}

// EventSessionID returns the chargingSessionIdentifier written for an
// event without a session whose identity is key: "ev-" and key in 16
// lower-case hex digits.
func EventSessionID(key uint64) string {
	return string(appendEventID(nil, key))
}

func appendEventID(dst []byte, key uint64) []byte {
	const hexdigits = "0123456789abcdef"
	dst = append(dst, "ev-"...)
	for i := 60; i >= 0; i -= 4 {
		dst = append(dst, hexdigits[(key>>uint(i))&0xf])
	}
	return dst
}

// AppendCHFRecord appends r as a BER CHFRecord (the chargingFunctionRecord
// [200] alternative) to dst. It does not allocate when dst has room.
func AppendCHFRecord(dst []byte, r *Record) []byte {
	dst, rec := begin(dst, classContext, 200)
	dst = appendInt(dst, classContext, 0, RecordTypeCHF)
	dst = appendString(dst, classContext, 1, r.Node)
	if r.SUPI != "" {
		typ, data := subscription(r.SUPI)
		var m int
		dst, m = begin(dst, classContext, 2)
		dst = appendInt(dst, classContext, 0, typ)
		dst = appendString(dst, classContext, 1, data)
		dst = end(dst, m)
	}
	var m int
	dst, m = begin(dst, classContext, 3)
	dst = appendInt(dst, classContext, 0, int64(r.Consumer))
	dst = end(dst, m)
	if len(r.Usage) > 0 {
		dst = appendUsage(dst, r.Usage)
	}
	dst = appendTimeStamp(dst, 6, r.Opened)
	dst = appendInt(dst, classContext, 7, int64(r.Duration/time.Second))
	if r.Sequence > 0 {
		dst = appendUint(dst, classContext, 8, uint64(r.Sequence))
	}
	dst = appendInt(dst, classContext, 9, int64(r.Cause))
	dst = appendUint(dst, classContext, 11, r.LocalSequence)
	// recordExtensions [12] SET OF ManagementExtension
	dst, m = begin(dst, classContext, 12)
	var ext, info, seq int
	dst, ext = begin(dst, 0, 16) // SEQUENCE
	dst = appendBytes(dst, 0, 6, chargedOID)
	dst, info = begin(dst, classContext, 2) // information [2] ANY: explicit
	dst, seq = begin(dst, 0, 16)
	dst = appendInt(dst, 0, 2, r.Charged)
	if r.Currency != "" {
		dst = appendString(dst, 0, 12, r.Currency)
	}
	dst = end(dst, seq)
	dst = end(dst, info)
	dst = end(dst, ext)
	if r.Replay {
		dst, ext = begin(dst, 0, 16)
		dst = appendBytes(dst, 0, 6, replayOID)
		dst, info = begin(dst, classContext, 2)
		dst, seq = begin(dst, 0, 16)
		dst = appendUint(dst, 0, 2, uint64(r.ReplaySeq))
		dst = end(dst, seq)
		dst = end(dst, info)
		dst = end(dst, ext)
	}
	dst = end(dst, m)
	switch {
	case r.Session != "":
		dst = appendString(dst, classContext, 16, r.Session)
	case r.EventKey != 0:
		var id [19]byte
		dst = appendBytes(dst, classContext, 16, appendEventID(id[:0], r.EventKey))
	}
	return end(dst, rec)
}

// appendUsage appends listOfMultipleUnitUsage [5]: one MultipleUnitUsage
// per rating group, in order of first appearance, each with its
// containers in order.
func appendUsage(dst []byte, us []Usage) []byte {
	dst, list := begin(dst, classContext, 5)
	for i := range us {
		rg := us[i].RatingGroup
		seen := false
		for j := range i {
			if us[j].RatingGroup == rg {
				seen = true
				break
			}
		}
		if seen {
			continue
		}
		var muu, cs int
		dst, muu = begin(dst, 0, 16)
		dst = appendUint(dst, classContext, 0, uint64(rg))
		dst, cs = begin(dst, classContext, 1)
		for j := i; j < len(us); j++ {
			u := &us[j]
			if u.RatingGroup != rg {
				continue
			}
			var c int
			dst, c = begin(dst, 0, 16)
			switch u.Service {
			case chf.ServiceVoice:
				dst = appendUint(dst, classContext, 1, u.Units)
			}
			if !u.At.IsZero() {
				dst = appendTimeStamp(dst, 3, u.At)
			}
			switch u.Service {
			case chf.ServiceData:
				dst = appendUint(dst, classContext, 4, u.Units)
			case chf.ServiceSMS:
				dst = appendUint(dst, classContext, 7, u.Units)
			}
			dst = appendUint(dst, classContext, 9, uint64(u.Seq))
			dst = end(dst, c)
		}
		dst = end(dst, cs)
		dst = end(dst, muu)
	}
	return end(dst, list)
}

// appendTimeStamp appends a TimeStamp (OCTET STRING (SIZE(9)):
// YYMMDDhhmmss in BCD, then '+' and the UTC offset hhmm in BCD), in UTC.
func appendTimeStamp(dst []byte, n uint32, t time.Time) []byte {
	t = t.UTC()
	dst = appendTag(dst, classContext, 0, n)
	bcd := func(v int) byte { return byte(v/10)<<4 | byte(v%10) }
	return append(dst, 9, bcd(t.Year()%100), bcd(int(t.Month())), bcd(t.Day()),
		bcd(t.Hour()), bcd(t.Minute()), bcd(t.Second()), '+', 0, 0)
}

// subscription splits a SUPI/GPSI into SubscriptionIDType and data.
func subscription(s string) (int64, string) {
	switch {
	case strings.HasPrefix(s, "imsi-"):
		return subscriptionIMSI, s[len("imsi-"):]
	case strings.HasPrefix(s, "msisdn-"):
		return subscriptionE164, s[len("msisdn-"):]
	case strings.HasPrefix(s, "nai-"):
		return subscriptionNAI, s[len("nai-"):]
	}
	return subscriptionPriv, s
}

// encodeOID returns the contents octets of a dotted OBJECT IDENTIFIER.
func encodeOID(s string) []byte {
	var arcs []uint64
	for _, p := range strings.Split(s, ".") {
		var v uint64
		for _, c := range p {
			if c < '0' || c > '9' {
				panic("BUG: bad OID " + s)
			}
			v = v*10 + uint64(c-'0')
		}
		arcs = append(arcs, v)
	}
	if len(arcs) < 2 {
		panic("BUG: short OID " + s)
	}
	arcs = append([]uint64{arcs[0]*40 + arcs[1]}, arcs[2:]...)
	var out []byte
	for _, a := range arcs {
		var tmp [10]byte
		i := len(tmp) - 1
		tmp[i] = byte(a & 0x7f)
		for a >>= 7; a > 0; a >>= 7 {
			i--
			tmp[i] = byte(a&0x7f) | 0x80
		}
		out = append(out, tmp[i:]...)
	}
	return out
}
