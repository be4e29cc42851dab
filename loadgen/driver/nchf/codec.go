package nchf

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// The codec: Nchf_ConvergedCharging (TS 32.291) request bodies and paths
// built with append-style code (no encoding/json, no reflection), and
// scanners for the few response fields the load generator needs: per
// rating group resultCode and the ChargingDataRef from Location.
// Builders append to a caller-owned buffer and never keep it; they are
// safe for concurrent use.

// Paths of the CHF's Nchf and account APIs.
const (
	PathCreate   = "/nchf-convergedcharging/v3/chargingdata"
	PathAccounts = "/chf/v1/accounts/"
)

// Line is one multipleUnitUsage entry.
type Line struct {
	RatingGroup uint32
	Request     bool      // include requestedUnit
	Requested   chf.Units // amounts asked for (zero fields omitted)
	Used        *chf.Units
	// Offline marks the used unit container quotaManagementIndicator
	// OFFLINE_CHARGING; Reauthorized gives it the trigger
	// FORCED_REAUTHORISATION.
	Offline      bool
	Reauthorized bool
}

// Request is the variable part of a ChargingDataRequest.
type Request struct {
	SUPI []byte
	// Node is nfConsumerIdentification.nodeFunctionality ("SMF" when empty;
	// "SMSF" for SMS events).
	Node    string
	NFName  string // nfConsumerIdentification.nFName (an NfInstanceId UUID)
	Seq     uint32
	Now     time.Time
	OneTime bool // oneTimeEvent with oneTimeEventType IEC
	// Retransmit sets retransmissionIndicator.
	Retransmit bool
	// NotifyBase, when set, makes the request carry notifyUri
	// NotifyBase + the decimal NotifyFlow (the driver's notify server
	// routes the notification back to the flow by it).
	NotifyBase string
	NotifyFlow uint64
	Line       Line
}

// AppendBody appends the ChargingDataRequest JSON of r to dst.
func AppendBody(dst []byte, r *Request) []byte {
	dst = append(dst, `{"subscriberIdentifier":"`...)
	dst = append(dst, r.SUPI...)
	dst = append(dst, `","nfConsumerIdentification":{"nodeFunctionality":"`...)
	if r.Node == "" {
		dst = append(dst, "SMF"...)
	} else {
		dst = append(dst, r.Node...)
	}
	dst = append(dst, `","nFName":"`...)
	dst = append(dst, r.NFName...)
	dst = append(dst, `"},"invocationTimeStamp":"`...)
	// Nanoseconds: the CHF identifies a create or event by consumer,
	// subscriber, sequence number and this timestamp (issue 13), so two
	// flows of one subscriber must not share it.
	dst = appendInvocationTimestamp(dst, r.Now)
	dst = append(dst, `","invocationSequenceNumber":`...)
	dst = strconv.AppendUint(dst, uint64(r.Seq), 10)
	if r.Retransmit {
		dst = append(dst, `,"retransmissionIndicator":true`...)
	}
	if r.OneTime {
		dst = append(dst, `,"oneTimeEvent":true,"oneTimeEventType":"IEC"`...)
	}
	if r.NotifyBase != "" {
		dst = append(dst, `,"notifyUri":"`...)
		dst = append(dst, r.NotifyBase...)
		dst = strconv.AppendUint(dst, r.NotifyFlow, 10)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"multipleUnitUsage":[{"ratingGroup":`...)
	dst = strconv.AppendUint(dst, uint64(r.Line.RatingGroup), 10)
	if r.Line.Request {
		dst = append(dst, `,"requestedUnit":`...)
		dst = appendUnits(dst, r.Line.Requested, -1)
	}
	if r.Line.Used != nil {
		dst = append(dst, `,"usedUnitContainer":[`...)
		dst = appendUnits(dst, *r.Line.Used, int64(r.Seq))
		if r.Line.Offline {
			dst = append(dst[:len(dst)-1], `,"quotaManagementIndicator":"OFFLINE_CHARGING"}`...)
		}
		if r.Line.Reauthorized {
			dst = append(dst[:len(dst)-1], `,"triggers":[{"triggerType":"FORCED_REAUTHORISATION","triggerCategory":"IMMEDIATE_REPORT"}]}`...)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}]}"...)
}

// appendUnits writes a RequestedUnit, or a UsedUnitContainer when lsn >= 0.
func appendUnits(dst []byte, u chf.Units, lsn int64) []byte {
	dst = append(dst, '{')
	sep := false
	field := func(name string, v uint64) {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
		dst = strconv.AppendUint(dst, v, 10)
		sep = true
	}
	if u.TotalVolume != 0 {
		field("totalVolume", u.TotalVolume)
	}
	if u.UplinkVolume != 0 {
		field("uplinkVolume", u.UplinkVolume)
	}
	if u.DownlinkVolume != 0 {
		field("downlinkVolume", u.DownlinkVolume)
	}
	if u.Time != 0 {
		field("time", uint64(u.Time))
	}
	if u.ServiceSpecific != 0 {
		field("serviceSpecificUnits", u.ServiceSpecific)
	}
	if lsn >= 0 {
		field("localSequenceNumber", uint64(lsn))
	}
	return append(dst, '}')
}

// AppendUpdatePath appends the update path of the session ref.
func AppendUpdatePath(dst, ref []byte) []byte {
	dst = append(dst, PathCreate...)
	dst = append(dst, '/')
	dst = append(dst, ref...)
	return append(dst, "/update"...)
}

// AppendReleasePath appends the release path of the session ref.
func AppendReleasePath(dst, ref []byte) []byte {
	dst = append(dst, PathCreate...)
	dst = append(dst, '/')
	dst = append(dst, ref...)
	return append(dst, "/release"...)
}

// AppendAccountPath appends the balance inquiry path of supi.
func AppendAccountPath(dst, supi []byte) []byte {
	dst = append(dst, PathAccounts...)
	return append(dst, supi...)
}

var marker = []byte("/chargingdata/")

// RefFromLocation returns the ChargingDataRef at the end of a Location
// header value (absolute URI or path), or nil. It aliases loc.
func RefFromLocation(loc []byte) []byte {
	i := bytes.LastIndex(loc, marker)
	if i < 0 {
		return nil
	}
	ref := loc[i+len(marker):]
	if j := bytes.IndexAny(ref, "/?#"); j >= 0 {
		ref = ref[:j]
	}
	if len(ref) == 0 {
		return nil
	}
	return ref
}

var resultCodeKey = []byte(`"resultCode"`)

// FailedResultCodes calls fn with every resultCode in body that is not
// SUCCESS (the slice aliases body). It scans bytes; it does not validate
// the JSON.
func FailedResultCodes(body []byte, fn func(code []byte)) {
	for {
		i := bytes.Index(body, resultCodeKey)
		if i < 0 {
			return
		}
		body = body[i+len(resultCodeKey):]
		// skip spaces and the colon, then the opening quote
		j := 0
		for j < len(body) && (body[j] == ' ' || body[j] == ':' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j >= len(body) || body[j] != '"' {
			continue
		}
		body = body[j+1:]
		k := bytes.IndexByte(body, '"')
		if k < 0 {
			return
		}
		code := body[:k]
		if string(code) != "SUCCESS" {
			fn(code)
		}
		body = body[k+1:]
	}
}

// ParseCharged parses an X-Chf-Charged header value (decimal minor units).
func ParseCharged(v []byte) (int64, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// ParseRetryAfter reads a Retry-After header value (RFC 9110 10.2.3):
// delay-seconds, or an HTTP-date taken relative to now. It reports false
// for an absent or malformed value; a date in the past is a wait of 0.
func ParseRetryAfter(v []byte, now time.Time) (time.Duration, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var n int64
		for _, c := range v {
			if c < '0' || c > '9' {
				return 0, false
			}
			if n > (1<<62)/int64(time.Second) {
				return 0, false // beyond any sane wait; the engine caps anyway
			}
			n = n*10 + int64(c-'0')
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

var (
	grantedKey   = []byte(`"grantedUnit":`)
	validityKey  = []byte(`"validityTime":`)
	thresholdKey = [...][]byte{[]byte(`"volumeQuotaThreshold":`), []byte(`"timeQuotaThreshold":`), []byte(`"unitQuotaThreshold":`)}
	unitKeys     = [...][]byte{[]byte(`"totalVolume":`), []byte(`"time":`), []byte(`"serviceSpecificUnits":`)}
)

// ScanGrant reads the first multipleUnitInformation's grantedUnit,
// validityTime and quota threshold of a ChargingDataResponse into g (the
// load generator sends one rating group per request); g.Has is false
// without a grantedUnit.
func ScanGrant(body []byte, g *driver.Grant) {
	*g = driver.Grant{}
	i := bytes.Index(body, grantedKey)
	if i < 0 {
		return
	}
	mui := body[i:] // the grant's own multipleUnitInformation entry onwards
	if end := bytes.IndexByte(mui, '}'); end > 0 {
		unit := mui[:end]
		g.Has = true
		g.Granted.TotalVolume = scanUint(unit, unitKeys[0])
		g.Granted.Time = uint32(scanUint(unit, unitKeys[1]))
		g.Granted.ServiceSpecific = scanUint(unit, unitKeys[2])
	}
	g.Validity = uint32(scanUint(mui, validityKey))
	for _, k := range thresholdKey {
		if v := scanUint(mui, k); v > 0 {
			g.Threshold = v
			break
		}
	}
}

// scanUint returns the unsigned integer after key in b (0 when absent).
func scanUint(b, key []byte) uint64 {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0
	}
	var v uint64
	for _, ch := range bytes.TrimLeft(b[i+len(key):], " ") {
		if ch < '0' || ch > '9' {
			break
		}
		v = v*10 + uint64(ch-'0')
	}
	return v
}
