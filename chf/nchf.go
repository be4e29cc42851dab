package chf

import (
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fastjson"
)

// This file is the part of the Nchf_ConvergedCharging data model (TS 32.291
// V17.9.0, API 3.1.6) the CHF acts on: decoding a ChargingDataRequest into
// the internal UsageLines and encoding ChargingDataResponse and
// ProblemDetails. Decoding walks a fastjson tree (no reflection) and checks
// every field it uses against the OpenAPI schema: mandatory fields
// (nfConsumerIdentification with nodeFunctionality, invocationTimeStamp,
// invocationSequenceNumber, ratingGroup, localSequenceNumber) and types.
// Fields the CHF does not use are ignored, as the schema allows.

// MaxUsageLines bounds the multipleUnitUsage entries of one request.
const MaxUsageLines = 64

// NchfRequest is what the CHF uses of a ChargingDataRequest. It is reused
// between requests: Decode resets it.
type NchfRequest struct {
	// SUPI is subscriberIdentifier ("" when absent).
	SUPI string
	// NodeFunctionality is nfConsumerIdentification.nodeFunctionality.
	NodeFunctionality string
	// Seq is invocationSequenceNumber.
	Seq uint32
	// Retransmission is retransmissionIndicator.
	Retransmission bool
	// OneTimeEvent is oneTimeEvent: event charging (immediate debit).
	OneTimeEvent bool
	// OneTimeEventType is oneTimeEventType ("IEC", "PEC" or "").
	OneTimeEventType string
	// Lines holds one entry per multipleUnitUsage (a rating group named
	// twice is refused), its usedUnitContainers summed container by
	// container: each container's volume is its totalVolume when present,
	// else its uplinkVolume + downlinkVolume, and Used.TotalVolume is the
	// sum of those (Used.UplinkVolume and Used.DownlinkVolume keep the sums
	// as reported).
	Lines []UsageLine
	// A line is Offline when its containers report quotaManagementIndicator
	// OFFLINE_CHARGING (all of them; a mix is refused).
	//
	// Key identifies the request across transmissions: FNV-1a over
	// nfConsumerIdentification (nodeFunctionality, nFName, nFIPv4Address,
	// nFIPv6Address, nFFqdn), subscriberIdentifier,
	// invocationSequenceNumber, pduSessionChargingInformation.chargingId
	// (when sent) and invocationTimeStamp (as sent). Loose is the same without the
	// timestamp (matched for a retransmissionIndicator request).
	Key, Loose uint64
	// NotifyURI is notifyUri (empty when absent; the buffer is reused).
	NotifyURI []byte
}

func (r *NchfRequest) reset() {
	lines, nu := r.Lines[:0], r.NotifyURI[:0]
	*r = NchfRequest{Lines: lines, NotifyURI: nu}
}

// FieldError says which part of a request is invalid. Param is a JSON
// Pointer into the body ("" when the body is not JSON at all), Reason a
// human-readable reason. Fronts turn it into a 400 ProblemDetails with cause
// CHARGING_FAILED and one invalidParams entry.
type FieldError struct {
	Param  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Param == "" {
		return "chf: invalid ChargingDataRequest: " + e.Reason
	}
	return "chf: invalid ChargingDataRequest field " + e.Param + ": " + e.Reason
}

// ErrNotJSON is wrapped in the FieldError for a body that is not valid JSON.
var ErrNotJSON = errors.New("chf: body is not valid JSON")

// NchfDecoder decodes ChargingDataRequests. It keeps its parse buffers
// between calls, so one decoder per goroutine (or a sync.Pool of them)
// decodes without allocating except for the SUPI string. Not safe for
// concurrent use.
type NchfDecoder struct {
	p    fastjson.Parser
	err  *FieldError
	trig Triggers // triggers of the container being decoded
	// offline: the container being decoded is OFFLINE_CHARGING.
	offline bool
}

// Decode parses body into r. It returns a *FieldError for a malformed
// body, a missing mandatory field or a wrong type. r does not keep
// references to body.
func (d *NchfDecoder) Decode(body []byte, r *NchfRequest) error {
	r.reset()
	d.err = nil
	// fastjson's parser is lax about numbers it is not asked to read;
	// validating first keeps malformed bodies out at a small cost.
	if err := fastjson.ValidateBytes(body); err != nil {
		return &FieldError{Reason: "malformed JSON: " + err.Error()}
	}
	v, err := d.p.ParseBytes(body)
	if err != nil {
		return &FieldError{Reason: "malformed JSON: " + err.Error()}
	}
	o, err := v.Object()
	if err != nil {
		return &FieldError{Param: "/", Reason: "must be a JSON object (ChargingDataRequest)"}
	}
	var haveNF, haveTS, haveSeq bool
	var nfHash, tsHash, pduHash uint64
	o.Visit(func(key []byte, v *fastjson.Value) {
		if d.err != nil {
			return
		}
		switch string(key) {
		case "subscriberIdentifier":
			b, ok := d.str(v, "/subscriberIdentifier")
			if ok {
				if len(b) == 0 {
					d.fail("/subscriberIdentifier", "must not be empty")
					return
				}
				r.SUPI = string(b)
			}
		case "nfConsumerIdentification":
			haveNF = true
			d.decodeNF(v, r)
			nfHash = hashFields(v, "nodeFunctionality", "nFName", "nFIPv4Address", "nFIPv6Address", "nFFqdn")
		case "pduSessionChargingInformation":
			pduHash = hashFields(v, "chargingId", "chargingIdentifier")
		case "invocationTimeStamp":
			haveTS = true
			if b, ok := d.str(v, "/invocationTimeStamp"); ok {
				if _, err := time.Parse(time.RFC3339, string(b)); err != nil {
					d.fail("/invocationTimeStamp", "must be a date-time (RFC 3339)")
				}
				tsHash = Hash(HashSeed, b)
			}
		case "invocationSequenceNumber":
			haveSeq = true
			r.Seq = d.uint32(v, "/invocationSequenceNumber")
		case "retransmissionIndicator":
			r.Retransmission = d.bool(v, "/retransmissionIndicator")
		case "oneTimeEvent":
			r.OneTimeEvent = d.bool(v, "/oneTimeEvent")
		case "oneTimeEventType":
			if b, ok := d.str(v, "/oneTimeEventType"); ok {
				switch string(b) {
				case "IEC":
					r.OneTimeEventType = "IEC"
				case "PEC":
					r.OneTimeEventType = "PEC"
				default:
					r.OneTimeEventType = string(b)
				}
			}
		case "multipleUnitUsage":
			d.decodeMUUs(v, r)
		case "notifyUri":
			if b, ok := d.str(v, "/notifyUri"); ok {
				r.NotifyURI = append(r.NotifyURI[:0], b...)
			}
		case "tenantIdentifier", "mnSConsumerIdentifier", "serviceSpecificationInfo", "supportedFeatures":
			d.str(v, "/"+string(key))
		}
	})
	if d.err != nil {
		err := d.err
		d.err = nil
		return err
	}
	switch {
	case !haveNF:
		return &FieldError{Param: "/nfConsumerIdentification", Reason: "mandatory field missing"}
	case !haveTS:
		return &FieldError{Param: "/invocationTimeStamp", Reason: "mandatory field missing"}
	case !haveSeq:
		return &FieldError{Param: "/invocationSequenceNumber", Reason: "mandatory field missing"}
	}
	h := HashUint(HashSeed, nfHash)
	h = HashString(h, r.SUPI)
	h = HashUint(h, uint64(r.Seq))
	r.Loose = HashUint(h, pduHash)
	r.Key = HashUint(r.Loose, tsHash)
	return nil
}

// hashFields hashes the named members of object v, in the order named
// (so the members' order in the body does not matter), as they were sent.
func hashFields(v *fastjson.Value, names ...string) uint64 {
	h := HashSeed
	o, err := v.Object()
	if err != nil {
		return h
	}
	for _, n := range names {
		f := o.Get(n)
		h = HashUint(h, uint64(len(n)))
		if f == nil {
			continue
		}
		switch f.Type() {
		case fastjson.TypeString:
			b, _ := f.StringBytes()
			h = Hash(h, b)
		case fastjson.TypeNumber:
			u, _ := f.Uint64()
			h = HashUint(h, u)
		}
	}
	return h
}

func (d *NchfDecoder) fail(param, reason string) {
	if d.err == nil {
		d.err = &FieldError{Param: param, Reason: reason}
	}
}

func (d *NchfDecoder) str(v *fastjson.Value, param string) ([]byte, bool) {
	if v.Type() != fastjson.TypeString {
		d.fail(param, "must be a string")
		return nil, false
	}
	b, _ := v.StringBytes()
	return b, true
}

func (d *NchfDecoder) bool(v *fastjson.Value, param string) bool {
	b, err := v.Bool()
	if err != nil {
		d.fail(param, "must be a boolean")
	}
	return b
}

func (d *NchfDecoder) uint64(v *fastjson.Value, param string) uint64 {
	if v.Type() != fastjson.TypeNumber {
		d.fail(param, "must be an unsigned integer")
		return 0
	}
	n, err := v.Uint64()
	if err != nil {
		d.fail(param, "must be an unsigned integer")
	}
	return n
}

func (d *NchfDecoder) uint32(v *fastjson.Value, param string) uint32 {
	n := d.uint64(v, param)
	if n > 1<<32-1 {
		d.fail(param, "must be an unsigned 32-bit integer")
		return 0
	}
	return uint32(n)
}

func (d *NchfDecoder) decodeNF(v *fastjson.Value, r *NchfRequest) {
	o, err := v.Object()
	if err != nil {
		d.fail("/nfConsumerIdentification", "must be an object (NFIdentification)")
		return
	}
	nf := o.Get("nodeFunctionality")
	if nf == nil {
		d.fail("/nfConsumerIdentification/nodeFunctionality", "mandatory field missing")
		return
	}
	if b, ok := d.str(nf, "/nfConsumerIdentification/nodeFunctionality"); ok {
		switch string(b) {
		case "SMF":
			r.NodeFunctionality = "SMF"
		case "SMSF":
			r.NodeFunctionality = "SMSF"
		case "PGW_C_SMF":
			r.NodeFunctionality = "PGW_C_SMF"
		default:
			r.NodeFunctionality = string(b)
		}
	}
}

func (d *NchfDecoder) decodeMUUs(v *fastjson.Value, r *NchfRequest) {
	arr, err := v.Array()
	if err != nil {
		d.fail("/multipleUnitUsage", "must be an array (MultipleUnitUsage)")
		return
	}
	if len(arr) > MaxUsageLines {
		d.fail("/multipleUnitUsage", "at most "+strconv.Itoa(MaxUsageLines)+" entries")
		return
	}
	for i, e := range arr {
		o, err := e.Object()
		if err != nil {
			d.fail(idxParam("/multipleUnitUsage/", i, ""), "must be an object (MultipleUnitUsage)")
			return
		}
		var line UsageLine
		rg := o.Get("ratingGroup")
		if rg == nil {
			d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"), "mandatory field missing")
			return
		}
		if rg.Type() != fastjson.TypeNumber {
			d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"), "must be an unsigned 32-bit integer")
			return
		}
		line.RatingGroup = d.uint32(rg, "")
		if d.err != nil {
			d.err.Param = idxParam("/multipleUnitUsage/", i, "/ratingGroup")
			return
		}
		if ru := o.Get("requestedUnit"); ru != nil {
			line.Request = true
			d.units(ru, &line.Requested, i, -1)
		}
		for k := range r.Lines {
			if r.Lines[k].RatingGroup == line.RatingGroup {
				d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"),
					"rating group "+strconv.FormatUint(uint64(line.RatingGroup), 10)+" already named in "+idxParam("/multipleUnitUsage/", k, ""))
				return
			}
		}
		if uc := o.Get("usedUnitContainer"); uc != nil {
			cs, err := uc.Array()
			if err != nil {
				d.fail(idxParam("/multipleUnitUsage/", i, "/usedUnitContainer"), "must be an array (UsedUnitContainer)")
				return
			}
			offline, online := 0, 0
			for j, c := range cs {
				var u Units
				d.trig, d.offline = 0, false
				hasTotal := d.units(c, &u, i, j)
				line.Reported |= d.trig
				if d.offline {
					offline++
				} else {
					online++
				}
				vol := u.UplinkVolume + u.DownlinkVolume
				if hasTotal {
					vol = u.TotalVolume
				} else if vol < u.UplinkVolume {
					d.fail(unitParam(i, j, ""), "uplinkVolume + downlinkVolume overflows 64 bits")
				}
				if !line.Used.Add(u, vol) {
					d.fail(unitParam(i, j, ""), "the rating group's usage overflows")
				}
			}
			if offline > 0 && online > 0 {
				d.fail(idxParam("/multipleUnitUsage/", i, "/usedUnitContainer"), "the containers of one rating group must be all OFFLINE_CHARGING or none")
			}
			line.Offline = offline > 0
		}
		if d.err != nil {
			return
		}
		r.Lines = append(r.Lines, line)
	}
}

// units decodes a RequestedUnit (j < 0) or the j-th UsedUnitContainer of
// multipleUnitUsage i; it reports whether totalVolume was present.
func (d *NchfDecoder) units(v *fastjson.Value, u *Units, i, j int) (hasTotal bool) {
	if d.err != nil {
		return false
	}
	o, err := v.Object()
	if err != nil {
		d.fail(unitParam(i, j, ""), "must be an object")
		return false
	}
	if j >= 0 {
		lsn := o.Get("localSequenceNumber")
		if lsn == nil {
			d.fail(unitParam(i, j, "/localSequenceNumber"), "mandatory field missing")
			return false
		}
		if lsn.Type() != fastjson.TypeNumber {
			d.fail(unitParam(i, j, "/localSequenceNumber"), "must be an integer")
			return false
		}
		if _, err := lsn.Int64(); err != nil {
			d.fail(unitParam(i, j, "/localSequenceNumber"), "must be an integer")
			return false
		}
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if d.err != nil {
			return
		}
		switch string(key) {
		case "time":
			u.Time = d.uint32(v, "x")
		case "totalVolume":
			u.TotalVolume = d.uint64(v, "x")
			hasTotal = true
		case "uplinkVolume":
			u.UplinkVolume = d.uint64(v, "x")
		case "downlinkVolume":
			u.DownlinkVolume = d.uint64(v, "x")
		case "serviceSpecificUnits":
			u.ServiceSpecific = d.uint64(v, "x")
		case "quotaManagementIndicator":
			if j >= 0 {
				if b, ok := d.str(v, "x"); ok {
					d.offline = string(b) == "OFFLINE_CHARGING"
				}
			}
		case "triggers":
			if j >= 0 {
				d.triggers(v, i, j)
			}
			return
		default:
			return
		}
		if d.err != nil && d.err.Param == "x" {
			d.err.Param = unitParam(i, j, "/"+string(key))
		}
	})
	return hasTotal
}

// triggers decodes the triggers of used unit container j of
// multipleUnitUsage i into d.trig (Trigger: triggerCategory mandatory).
func (d *NchfDecoder) triggers(v *fastjson.Value, i, j int) {
	arr, err := v.Array()
	if err != nil {
		d.fail(unitParam(i, j, "/triggers"), "must be an array (Trigger)")
		return
	}
	for k, t := range arr {
		o, err := t.Object()
		if err != nil {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)), "must be an object (Trigger)")
			return
		}
		cat := o.Get("triggerCategory")
		if cat == nil {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerCategory"), "mandatory field missing")
			return
		}
		if cat.Type() != fastjson.TypeString {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerCategory"), "must be a string")
			return
		}
		if tt := o.Get("triggerType"); tt != nil {
			b, err := tt.StringBytes()
			if err != nil {
				d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerType"), "must be a string")
				return
			}
			d.trig |= ParseTrigger(b)
		}
	}
}

func idxParam(prefix string, i int, suffix string) string {
	return prefix + strconv.Itoa(i) + suffix
}

func unitParam(i, j int, suffix string) string {
	if j < 0 {
		return idxParam("/multipleUnitUsage/", i, "/requestedUnit"+suffix)
	}
	return idxParam("/multipleUnitUsage/", i, "/usedUnitContainer/"+strconv.Itoa(j)+suffix)
}

// ResultCode is the Nchf resultCode of a per-rating-group result.
func ResultCode(r Result) string {
	switch r {
	case ResultSuccess:
		return "SUCCESS"
	case ResultQuotaLimitReached:
		return "QUOTA_LIMIT_REACHED"
	case ResultEndUserServiceDenied:
		return "END_USER_SERVICE_DENIED"
	case ResultUserUnknown:
		return "USER_UNKNOWN"
	case ResultRatingFailed:
		return "RATING_FAILED"
	}
	return "END_USER_SERVICE_REJECTED"
}

// AppendChargingDataResponse appends a ChargingDataResponse JSON object to
// dst: invocationTimeStamp ts (UTC, RFC 3339), invocationSequenceNumber seq
// and one multipleUnitInformation per grant line.
func AppendChargingDataResponse(dst []byte, ts time.Time, seq uint32, lines []GrantLine) []byte {
	dst = append(dst, `{"invocationTimeStamp":"`...)
	dst = ts.UTC().AppendFormat(dst, time.RFC3339)
	dst = append(dst, `","invocationSequenceNumber":`...)
	dst = strconv.AppendUint(dst, uint64(seq), 10)
	if len(lines) > 0 {
		dst = append(dst, `,"multipleUnitInformation":[`...)
		for i := range lines {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendMUI(dst, &lines[i])
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

func appendMUI(dst []byte, g *GrantLine) []byte {
	dst = append(dst, `{"resultCode":"`...)
	dst = append(dst, ResultCode(g.Result)...)
	dst = append(dst, `","ratingGroup":`...)
	dst = strconv.AppendUint(dst, uint64(g.RatingGroup), 10)
	if !g.Granted.IsZero() || g.Result == ResultSuccess {
		dst = append(dst, `,"grantedUnit":`...)
		dst = AppendUnits(dst, &g.Granted)
	}
	if g.ValidityTime > 0 {
		dst = append(dst, `,"validityTime":`...)
		dst = strconv.AppendUint(dst, uint64(g.ValidityTime), 10)
	}
	if g.QuotaHoldingTime > 0 {
		dst = append(dst, `,"quotaHoldingTime":`...)
		dst = strconv.AppendUint(dst, uint64(g.QuotaHoldingTime), 10)
	}
	if g.Triggers != 0 {
		dst = append(dst, `,"triggers":[`...)
		first := true
		for t := Triggers(1); t < TriggerOther; t <<= 1 {
			if g.Triggers&t == 0 {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, `{"triggerType":"`...)
			dst = append(dst, TriggerName(t)...)
			dst = append(dst, `","triggerCategory":"IMMEDIATE_REPORT"}`...)
		}
		dst = append(dst, ']')
	}
	if g.Threshold > 0 {
		switch {
		case g.Granted.TotalVolume != 0:
			dst = append(dst, `,"volumeQuotaThreshold":`...)
		case g.Granted.Time != 0:
			dst = append(dst, `,"timeQuotaThreshold":`...)
		default:
			dst = append(dst, `,"unitQuotaThreshold":`...)
		}
		dst = strconv.AppendUint(dst, g.Threshold, 10)
	}
	if g.FinalUnit {
		dst = appendFUI(dst, g)
	}
	return append(dst, '}')
}

// redirectTypes are the Nchf RedirectAddressType names by RedirectType.
var redirectTypes = [...]string{RedirectIPv4: "IPV4", RedirectIPv6: "IPV6", RedirectURL: "URL", RedirectURI: "URI"}

func appendFUI(dst []byte, g *GrantLine) []byte {
	switch g.FinalAction {
	case FinalRedirect:
		dst = append(dst, `,"finalUnitIndication":{"finalUnitAction":"REDIRECT","redirectServer":{"redirectAddressType":"`...)
		if int(g.RedirectType) < len(redirectTypes) {
			dst = append(dst, redirectTypes[g.RedirectType]...)
		}
		dst = append(dst, `","redirectServerAddress":`...)
		dst = AppendJSONString(dst, g.Redirect)
		return append(dst, `}}`...)
	case FinalRestrictAccess:
		dst = append(dst, `,"finalUnitIndication":{"finalUnitAction":"RESTRICT_ACCESS","filterId":`...)
		dst = AppendJSONString(dst, g.FilterID)
		return append(dst, '}')
	}
	return append(dst, `,"finalUnitIndication":{"finalUnitAction":"TERMINATE"}`...)
}

// AppendUnits appends u as a GrantedUnit/RequestedUnit JSON object with
// only the non-zero fields.
func AppendUnits(dst []byte, u *Units) []byte {
	dst = append(dst, '{')
	n := len(dst)
	dst = appendUnitField(dst, n, "time", uint64(u.Time))
	dst = appendUnitField(dst, n, "totalVolume", u.TotalVolume)
	dst = appendUnitField(dst, n, "uplinkVolume", u.UplinkVolume)
	dst = appendUnitField(dst, n, "downlinkVolume", u.DownlinkVolume)
	dst = appendUnitField(dst, n, "serviceSpecificUnits", u.ServiceSpecific)
	return append(dst, '}')
}

func appendUnitField(dst []byte, n int, name string, v uint64) []byte {
	if v == 0 {
		return dst
	}
	if len(dst) > n {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return strconv.AppendUint(dst, v, 10)
}

// Problem is a ProblemDetails (TS 29.571) as the CHF sends it.
type Problem struct {
	Status int
	Title  string
	Cause  string // TS 32.291 / TS 29.500 application error cause
	Detail string
	// Param and Reason, when Param is set, form the one invalidParams entry.
	Param  string
	Reason string
}

// AppendProblemDetails appends p as a ProblemDetails JSON object.
func AppendProblemDetails(dst []byte, p *Problem) []byte {
	dst = append(dst, `{"title":`...)
	dst = AppendJSONString(dst, p.Title)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(p.Status), 10)
	if p.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = AppendJSONString(dst, p.Detail)
	}
	if p.Cause != "" {
		dst = append(dst, `,"cause":`...)
		dst = AppendJSONString(dst, p.Cause)
	}
	if p.Param != "" {
		dst = append(dst, `,"invalidParams":[{"param":`...)
		dst = AppendJSONString(dst, p.Param)
		if p.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = AppendJSONString(dst, p.Reason)
		}
		dst = append(dst, `}]`...)
	}
	return append(dst, '}')
}

// AppendJSONString appends s as a quoted JSON string, escaping what JSON
// requires (quotes, backslashes, control characters) and <, >, & like
// encoding/json does. Invalid UTF-8 is passed through as is.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0x7f {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
