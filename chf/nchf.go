package chf

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// This file is the part of the Nchf_ConvergedCharging data model (TS 32.291
// V17.9.0, API 3.1.6) the CHF acts on: decoding a ChargingDataRequest into
// the internal UsageLines and encoding ChargingDataResponse and
// ProblemDetails. Decoding reads the body in one pass (no parse tree, no
// reflection) after fastjson's validator has accepted it, and checks
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
	// (when sent) and invocationTimeStamp (as sent). A retransmission
	// repeats all of them: only the exact identity answers a repeat.
	Key uint64
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

// NchfDecoder decodes ChargingDataRequests in one pass over the body that
// both checks the JSON syntax (as strictly as fastjson's validator: RFC
// 8259, nesting at most maxDepth deep) and reads the members the CHF uses:
// no parse tree, no reflection. It keeps its buffers between calls, so
// one decoder per goroutine (or a sync.Pool of them) decodes without
// allocating except for the SUPI string. Not safe for concurrent use.
//
// A body that is not valid JSON is refused as malformed whatever else is
// wrong with it. Next, a member the decoder reads (readMembers: in the
// request, its nfConsumerIdentification, pduSessionChargingInformation,
// multipleUnitUsage entries, their requestedUnit, usedUnitContainers and
// triggers) given twice in one object is refused, naming the member
// (the first such in the body's order), before any other field error:
// nothing is merged, nothing dropped. Of several other errors, the one
// reported is the first in the order the members are checked: a usage
// entry's ratingGroup, then its requestedUnit, then its
// usedUnitContainer; a container's localSequenceNumber, then its other
// members in the body's order.
type NchfDecoder struct {
	// b is a copy of the body being decoded followed by a 0, which no
	// JSON token may hold, so every scan stops there.
	b   []byte
	err *FieldError
	// syntax: the body is not valid JSON (err is errSyntax); deep: it
	// nests more than maxDepth deep.
	syntax, deep bool
	trig         Triggers // triggers of the container being decoded
	// offline: the container being decoded is OFFLINE_CHARGING.
	offline bool
	kbuf    []byte // an unescaped member name
	sbuf    []byte // an unescaped string value
}

// maxDepth is the deepest nesting accepted: a value inside maxDepth
// arrays or objects is refused as malformed (fastjson's parser's bound).
const maxDepth = 300

// errSyntax stands in d.err for a syntax error while decoding; Decode
// replaces it with the validator's description.
var errSyntax = &FieldError{Reason: "malformed JSON"}

// Decode parses body into r. It returns a *FieldError for a malformed
// body, a missing mandatory field or a wrong type. r does not keep
// references to body.
func (d *NchfDecoder) Decode(body []byte, r *NchfRequest) error {
	r.reset()
	d.err, d.syntax, d.deep = nil, false, false
	d.b = append(append(d.b[:0], body...), 0)
	err := d.request(r)
	if err == nil {
		return nil
	}
	// Malformed JSON anywhere in the body comes before what its members
	// say: errors are rare, so the validator describes them.
	if verr := fastjson.ValidateBytes(body); verr != nil {
		return &FieldError{Reason: "malformed JSON: " + verr.Error()}
	}
	if !d.deep {
		// The decoding may have stopped before a part nested too deep.
		d.err, d.syntax = nil, false
		d.skip(ws(d.b, 0), 1)
	}
	if d.deep {
		return &FieldError{Reason: "malformed JSON: nested more than " + strconv.Itoa(maxDepth) + " deep"}
	}
	// A member named twice comes before what any member says.
	if fe := d.dupScan(); fe != nil {
		return fe
	}
	if err == errDuplicate {
		panic("BUG: chf: a duplicate member the scan does not find")
	}
	return err
}

// ReasonDuplicate is the FieldError reason of a member given twice.
const ReasonDuplicate = "member given more than once in its object"

// errDuplicate stands in d.err for a member given twice; Decode replaces
// it with dupScan's error.
var errDuplicate = &FieldError{Reason: ReasonDuplicate}

// duplicate records a member given twice.
func (d *NchfDecoder) duplicate() {
	if d.err == nil {
		d.err = errDuplicate
	}
}

// objKind is the kind of an object the decoder reads.
type objKind uint8

const (
	objRequest objKind = iota
	objNF
	objPDU
	objUsage
	objRequested
	objContainer
	objTrigger
)

// readMembers are the members the decoder reads in each kind of object:
// none of them may be given twice in one object.
var readMembers = [...][]string{
	objRequest: {"subscriberIdentifier", "nfConsumerIdentification", "pduSessionChargingInformation",
		"invocationTimeStamp", "invocationSequenceNumber", "retransmissionIndicator", "oneTimeEvent",
		"oneTimeEventType", "multipleUnitUsage", "notifyUri", "tenantIdentifier", "mnSConsumerIdentifier",
		"serviceSpecificationInfo", "supportedFeatures"},
	objNF:        nfIdentity[:],
	objPDU:       pduIdentity[:],
	objUsage:     usageMembers[:],
	objRequested: {"time", "totalVolume", "uplinkVolume", "downlinkVolume", "serviceSpecificUnits"},
	objContainer: {"localSequenceNumber", "time", "totalVolume", "uplinkVolume", "downlinkVolume",
		"serviceSpecificUnits", "quotaManagementIndicator", "triggers"},
	objTrigger: triggerMembers[:],
}

// memberBit is the bit of member name among readMembers[k] (0 when the
// decoder does not read it).
func memberBit(k objKind, name []byte) uint32 {
	for i, n := range readMembers[k] {
		if string(name) == n {
			return 1 << i
		}
	}
	return 0
}

// dupScan walks the objects the decoder reads, in the body's order, and
// returns the first member given twice in one of them (nil when none).
// The body is valid JSON.
func (d *NchfDecoder) dupScan() *FieldError {
	d.err, d.syntax = nil, false
	i := ws(d.b, 0)
	if d.b[i] != '{' {
		return nil
	}
	_, fe := d.dupObject(i, objRequest, "")
	return fe
}

// dupObject scans the object at v, of kind k at JSON Pointer ptr.
func (d *NchfDecoder) dupObject(v int, k objKind, ptr string) (int, *FieldError) {
	var seen uint32
	m, more := d.open(v, '}')
	for more {
		key, x := d.member(m)
		bit := memberBit(k, key)
		if bit != 0 && seen&bit != 0 {
			return x, &FieldError{Param: ptr + "/" + string(key), Reason: ReasonDuplicate}
		}
		seen |= bit
		var child objKind
		var array bool
		switch {
		case k == objRequest && string(key) == "nfConsumerIdentification":
			child = objNF
		case k == objRequest && string(key) == "pduSessionChargingInformation":
			child = objPDU
		case k == objRequest && string(key) == "multipleUnitUsage":
			child, array = objUsage, true
		case k == objUsage && string(key) == "requestedUnit":
			child = objRequested
		case k == objUsage && string(key) == "usedUnitContainer":
			child, array = objContainer, true
		case k == objContainer && string(key) == "triggers":
			child, array = objTrigger, true
		default:
			m, more = d.next(d.skip(x, 1), '}')
			continue
		}
		cptr := ptr + "/" + string(key)
		var end int
		var fe *FieldError
		if array {
			end, fe = d.dupArray(x, child, cptr)
		} else if d.b[x] == '{' {
			end, fe = d.dupObject(x, child, cptr)
		} else {
			end = d.skip(x, 1)
		}
		if fe != nil {
			return end, fe
		}
		m, more = d.next(end, '}')
	}
	return m, nil
}

// dupArray scans the objects, of kind k, of the array at v (any other
// value is skipped).
func (d *NchfDecoder) dupArray(v int, k objKind, ptr string) (int, *FieldError) {
	if d.b[v] != '[' {
		return d.skip(v, 1), nil
	}
	n := 0
	e, more := d.open(v, ']')
	for more {
		var end int
		if d.b[e] == '{' {
			var fe *FieldError
			if end, fe = d.dupObject(e, k, ptr+"/"+strconv.Itoa(n)); fe != nil {
				return end, fe
			}
		} else {
			end = d.skip(e, 1)
		}
		n++
		e, more = d.next(end, ']')
	}
	return e, nil
}

func (d *NchfDecoder) request(r *NchfRequest) *FieldError {
	b := d.b
	i := ws(b, 0)
	if b[i] != '{' {
		return &FieldError{Param: "/", Reason: "must be a JSON object (ChargingDataRequest)"}
	}
	var haveNF, haveTS, haveSeq bool
	var nfHash, tsHash, pduHash uint64
	var seen uint32
	m, more := d.open(i, '}')
	for more {
		key, v := d.member(m)
		if d.err != nil {
			return d.err
		}
		if bit := memberBit(objRequest, key); bit != 0 {
			if seen&bit != 0 {
				d.duplicate()
				return d.err
			}
			seen |= bit
		}
		switch string(key) {
		case "subscriberIdentifier":
			var s []byte
			if s, i = d.str(v, "/subscriberIdentifier"); d.err == nil {
				if len(s) == 0 {
					d.fail("/subscriberIdentifier", "must not be empty")
				}
				r.SUPI = string(s)
			}
		case "nfConsumerIdentification":
			haveNF = true
			nfHash, i = d.decodeNF(v, r)
		case "pduSessionChargingInformation":
			// A value that is not an object hashes as no identity.
			if b[v] == '{' {
				var at [len(pduIdentity)]int
				i = d.find(v, 2, pduIdentity[:], at[:])
				pduHash = d.hashFields(pduIdentity[:], at[:])
			} else {
				pduHash, i = HashSeed, d.skip(v, 2)
			}
		case "invocationTimeStamp":
			haveTS = true
			var s []byte
			if s, i = d.str(v, "/invocationTimeStamp"); d.err == nil {
				if _, err := time.Parse(time.RFC3339, string(s)); err != nil {
					d.fail("/invocationTimeStamp", "must be a date-time (RFC 3339)")
				}
				tsHash = Hash(HashSeed, s)
			}
		case "invocationSequenceNumber":
			haveSeq = true
			r.Seq, i = d.uint32(v, "/invocationSequenceNumber")
		case "retransmissionIndicator":
			r.Retransmission, i = d.bool(v, "/retransmissionIndicator")
		case "oneTimeEvent":
			r.OneTimeEvent, i = d.bool(v, "/oneTimeEvent")
		case "oneTimeEventType":
			var s []byte
			if s, i = d.str(v, "/oneTimeEventType"); d.err == nil {
				switch string(s) {
				case "IEC":
					r.OneTimeEventType = "IEC"
				case "PEC":
					r.OneTimeEventType = "PEC"
				default:
					r.OneTimeEventType = string(s)
				}
			}
		case "multipleUnitUsage":
			i = d.decodeMUUs(v, r)
		case "notifyUri":
			var s []byte
			if s, i = d.str(v, "/notifyUri"); d.err == nil {
				r.NotifyURI = append(r.NotifyURI[:0], s...)
			}
		case "tenantIdentifier", "mnSConsumerIdentifier", "serviceSpecificationInfo", "supportedFeatures":
			_, i = d.str(v, "/"+string(key))
		default:
			i = d.skip(v, 2)
		}
		if d.err != nil {
			return d.err
		}
		m, more = d.next(i, '}')
	}
	if ws(b, m) != len(b)-1 {
		d.bad()
	}
	if d.err != nil {
		return d.err
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
	r.Key = HashUint(HashUint(h, pduHash), tsHash)
	return nil
}

// The members hashed into a request's identity, in this order (so the
// members' order in the body does not matter), as they were sent.
var (
	nfIdentity  = [...]string{"nodeFunctionality", "nFName", "nFIPv4Address", "nFIPv6Address", "nFFqdn"}
	pduIdentity = [...]string{"chargingId", "chargingIdentifier"}
)

// hashFields hashes the members named, whose values are at at (0 when
// absent): a string as its unescaped bytes, a number as its unsigned
// value or 0, another type as absent.
func (d *NchfDecoder) hashFields(names []string, at []int) uint64 {
	b := d.b
	h := HashSeed
	for k, n := range names {
		h = HashUint(h, uint64(len(n)))
		x := at[k]
		switch {
		case x == 0:
		case b[x] == '"':
			s, _ := d.strValue(x)
			h = Hash(h, s)
		case isNumber(b[x]):
			u, _ := parseUint(b[x:d.number(x)])
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

// bad records a syntax error.
func (d *NchfDecoder) bad() {
	d.syntax = true
	if d.err == nil {
		d.err = errSyntax
	}
}

// str reads the string at v (unescaped; valid until the next string is
// read), failing param when v holds another type.
func (d *NchfDecoder) str(v int, param string) ([]byte, int) {
	if d.b[v] != '"' {
		d.fail(param, "must be a string")
		return nil, v
	}
	return d.strValue(v)
}

func (d *NchfDecoder) bool(v int, param string) (bool, int) {
	switch d.b[v] {
	case 't', 'f':
		end := d.skip(v, 2)
		return d.b[v] == 't', end
	}
	d.fail(param, "must be a boolean")
	return false, v
}

func (d *NchfDecoder) uint64(v int, param string) (uint64, int) {
	if !isNumber(d.b[v]) {
		d.fail(param, "must be an unsigned integer")
		return 0, v
	}
	end := d.number(v)
	n, ok := parseUint(d.b[v:end])
	if !ok {
		d.fail(param, "must be an unsigned integer")
	}
	return n, end
}

func (d *NchfDecoder) uint32(v int, param string) (uint32, int) {
	n, end := d.uint64(v, param)
	if n > 1<<32-1 {
		d.fail(param, "must be an unsigned 32-bit integer")
		return 0, end
	}
	return uint32(n), end
}

// decodeNF reads the nfConsumerIdentification at v: its identity hash
// and the index past it.
func (d *NchfDecoder) decodeNF(v int, r *NchfRequest) (uint64, int) {
	if d.b[v] != '{' {
		d.fail("/nfConsumerIdentification", "must be an object (NFIdentification)")
		return 0, v
	}
	var at [len(nfIdentity)]int
	end := d.find(v, 2, nfIdentity[:], at[:])
	if d.err != nil {
		return 0, end
	}
	nf := at[0] // nfIdentity[0] is nodeFunctionality
	if nf == 0 {
		d.fail("/nfConsumerIdentification/nodeFunctionality", "mandatory field missing")
		return 0, end
	}
	if s, _ := d.str(nf, "/nfConsumerIdentification/nodeFunctionality"); d.err == nil {
		switch string(s) {
		case "SMF":
			r.NodeFunctionality = "SMF"
		case "SMSF":
			r.NodeFunctionality = "SMSF"
		case "PGW_C_SMF":
			r.NodeFunctionality = "PGW_C_SMF"
		default:
			r.NodeFunctionality = string(s)
		}
	}
	return d.hashFields(nfIdentity[:], at[:]), end
}

// The members looked up (first occurrence) in the objects that hold them.
var (
	usageMembers     = [...]string{"ratingGroup", "requestedUnit", "usedUnitContainer"}
	containerMembers = [...]string{"localSequenceNumber"}
	triggerMembers   = [...]string{"triggerCategory", "triggerType"}
)

// find checks the object at v, at depth depth, and sets at[k] to the
// index of the value of the first member named names[k] (0 when absent);
// it returns the index past the object.
func (d *NchfDecoder) find(v, depth int, names []string, at []int) int {
	m, more := d.open(v, '}')
	for more {
		key, x := d.member(m)
		for k, n := range names {
			if string(key) == n {
				if at[k] != 0 {
					d.duplicate()
					return x
				}
				at[k] = x
				break
			}
		}
		m, more = d.next(d.skip(x, depth+1), '}')
	}
	return m
}

// Depths (the body's object is 1) of the values the decoder reads.
const (
	depthUsage     = 3 // a multipleUnitUsage entry
	depthUnits     = 4 // its requestedUnit, its usedUnitContainer array
	depthContainer = 5 // a usedUnitContainer
	depthTrigger   = 7 // a trigger of a container
)

func (d *NchfDecoder) decodeMUUs(v int, r *NchfRequest) int {
	if d.b[v] != '[' {
		d.fail("/multipleUnitUsage", "must be an array (MultipleUnitUsage)")
		return v
	}
	base, i := len(r.Lines), 0
	e, more := d.open(v, ']')
	for more {
		if base+i == MaxUsageLines {
			d.tooManyLines()
			return e
		}
		x := d.decodeMUU(e, i, r)
		if d.err != nil {
			// The bound comes before any entry's content.
			if !d.syntax && base+d.count(v, depthUsage) > MaxUsageLines {
				d.err = nil
				d.tooManyLines()
			}
			return x
		}
		i++
		e, more = d.next(x, ']')
	}
	return e
}

func (d *NchfDecoder) tooManyLines() {
	d.fail("/multipleUnitUsage", "at most "+strconv.Itoa(MaxUsageLines)+" entries")
}

// count checks the array at v, whose elements are at depth depth, and
// returns how many elements it has, keeping d.err unless the array is
// malformed.
func (d *NchfDecoder) count(v, depth int) int {
	err := d.err
	d.err = nil
	n := 0
	e, more := d.open(v, ']')
	for more {
		n++
		e, more = d.next(d.skip(e, depth), ']')
	}
	if d.err == nil {
		d.err = err
	}
	return n
}

// decodeMUU decodes multipleUnitUsage entry i, at e, into a line of r and
// returns the index past it. It reads the entry's members in order; a
// semantic error sends it to decodeMUUChecked, which checks them in the
// order that decides which error is reported.
func (d *NchfDecoder) decodeMUU(e, i int, r *NchfRequest) int {
	b := d.b
	if b[e] != '{' {
		d.fail(idxParam("/multipleUnitUsage/", i, ""), "must be an object (MultipleUnitUsage)")
		return e
	}
	var line UsageLine
	var haveRG, haveRU, haveUC bool
	m, more := d.open(e, '}')
	for more {
		key, x := d.member(m)
		end := x
		switch {
		case d.err != nil:
		case string(key) == "ratingGroup" && !haveRG:
			if !isNumber(b[x]) {
				return d.decodeMUUChecked(e, i, r)
			}
			haveRG = true
			line.RatingGroup, end = d.uint32(x, "")
		case string(key) == "requestedUnit" && !haveRU:
			haveRU, line.Request = true, true
			end = d.requested(x, i, &line)
		case string(key) == "usedUnitContainer" && !haveUC:
			haveUC = true
			end = d.containers(x, i, &line)
		case string(key) == "ratingGroup" || string(key) == "requestedUnit" || string(key) == "usedUnitContainer":
			d.duplicate()
		default:
			end = d.skip(x, depthUsage+1)
		}
		if d.err != nil {
			if d.syntax {
				return end
			}
			d.err = nil
			return d.decodeMUUChecked(e, i, r)
		}
		m, more = d.next(end, '}')
	}
	if d.err != nil {
		return m
	}
	if !haveRG {
		return d.decodeMUUChecked(e, i, r)
	}
	for k := range r.Lines {
		if r.Lines[k].RatingGroup == line.RatingGroup {
			return d.decodeMUUChecked(e, i, r)
		}
	}
	r.Lines = append(r.Lines, line)
	return m
}

// decodeMUUChecked decodes multipleUnitUsage entry i, at e, checking its
// members in their order (ratingGroup, requestedUnit, ratingGroup named
// before, usedUnitContainer), and returns the index past it.
func (d *NchfDecoder) decodeMUUChecked(e, i int, r *NchfRequest) int {
	b := d.b
	var at [len(usageMembers)]int
	end := d.find(e, depthUsage, usageMembers[:], at[:])
	if d.err != nil {
		return end
	}
	rg, ru, uc := at[0], at[1], at[2]
	var line UsageLine
	if rg == 0 {
		d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"), "mandatory field missing")
		return end
	}
	if !isNumber(b[rg]) {
		d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"), "must be an unsigned 32-bit integer")
		return end
	}
	line.RatingGroup, _ = d.uint32(rg, "")
	if d.err != nil {
		d.err.Param = idxParam("/multipleUnitUsage/", i, "/ratingGroup")
		return end
	}
	if ru != 0 {
		line.Request = true
		if d.requested(ru, i, &line); d.err != nil {
			return end
		}
	}
	for k := range r.Lines {
		if r.Lines[k].RatingGroup == line.RatingGroup {
			d.fail(idxParam("/multipleUnitUsage/", i, "/ratingGroup"),
				"rating group "+strconv.FormatUint(uint64(line.RatingGroup), 10)+" already named in "+idxParam("/multipleUnitUsage/", k, ""))
			return end
		}
	}
	if uc != 0 {
		if d.containers(uc, i, &line); d.err != nil {
			return end
		}
	}
	r.Lines = append(r.Lines, line)
	return end
}

// requested decodes the requestedUnit at v, of multipleUnitUsage i, into
// line and returns the index past it.
func (d *NchfDecoder) requested(v, i int, line *UsageLine) int {
	hasTotal, end := d.units(v, &line.Requested, i, -1)
	if _, ok := line.Requested.Volume(hasTotal); d.err == nil && !ok {
		d.fail(unitParam(i, -1, ""), "uplinkVolume + downlinkVolume overflows 64 bits")
	}
	return end
}

// containers adds the usedUnitContainer array at v, of multipleUnitUsage
// i, to line and returns the index past it.
func (d *NchfDecoder) containers(v, i int, line *UsageLine) int {
	if d.b[v] != '[' {
		d.fail(idxParam("/multipleUnitUsage/", i, "/usedUnitContainer"), "must be an array (UsedUnitContainer)")
		return v
	}
	offline, online, j := 0, 0, 0
	c, more := d.open(v, ']')
	for more {
		var u Units
		d.trig, d.offline = 0, false
		hasTotal, end := d.units(c, &u, i, j)
		if d.err != nil {
			return end
		}
		line.Reported |= d.trig
		if d.offline {
			offline++
		} else {
			online++
		}
		vol, ok := u.Volume(hasTotal)
		if !ok {
			d.fail(unitParam(i, j, ""), "uplinkVolume + downlinkVolume overflows 64 bits")
			return end
		}
		if !line.Used.Add(u, vol) {
			d.fail(unitParam(i, j, ""), "the rating group's usage overflows")
			return end
		}
		j++
		c, more = d.next(end, ']')
	}
	if offline > 0 && online > 0 {
		d.fail(idxParam("/multipleUnitUsage/", i, "/usedUnitContainer"), "the containers of one rating group must be all OFFLINE_CHARGING or none")
	}
	line.Offline = offline > 0
	return c
}

// units decodes a RequestedUnit (j < 0) or the j-th UsedUnitContainer of
// multipleUnitUsage i, at v; it reports whether totalVolume was present,
// and returns the index past it.
func (d *NchfDecoder) units(v int, u *Units, i, j int) (hasTotal bool, end int) {
	b := d.b
	if b[v] != '{' {
		d.fail(unitParam(i, j, ""), "must be an object")
		return false, v
	}
	depth := depthUnits
	if j >= 0 {
		depth = depthContainer
	}
	kind := objRequested
	if j >= 0 {
		kind = objContainer
	}
	var seen uint32
	lsn := 0
	m, more := d.open(v, '}')
	for more {
		key, x := d.member(m)
		if d.err != nil {
			return false, x
		}
		if bit := memberBit(kind, key); bit != 0 {
			if seen&bit != 0 {
				d.duplicate()
				return false, x
			}
			seen |= bit
		}
		var name string
		switch string(key) {
		case "localSequenceNumber":
			if j >= 0 && lsn == 0 {
				lsn = x
			}
			end = d.skip(x, depth+1)
		case "time":
			name = "/time"
			u.Time, end = d.uint32(x, name)
		case "totalVolume":
			name = "/totalVolume"
			u.TotalVolume, end = d.uint64(x, name)
			hasTotal = true
		case "uplinkVolume":
			name = "/uplinkVolume"
			u.UplinkVolume, end = d.uint64(x, name)
		case "downlinkVolume":
			name = "/downlinkVolume"
			u.DownlinkVolume, end = d.uint64(x, name)
		case "serviceSpecificUnits":
			name = "/serviceSpecificUnits"
			u.ServiceSpecific, end = d.uint64(x, name)
		case "quotaManagementIndicator":
			if j < 0 {
				end = d.skip(x, depth+1)
				break
			}
			name = "/quotaManagementIndicator"
			var s []byte
			if s, end = d.str(x, name); d.err == nil {
				d.offline = string(s) == "OFFLINE_CHARGING"
			}
		case "triggers":
			if j < 0 {
				end = d.skip(x, depth+1)
				break
			}
			end = d.triggers(x, i, j)
		default:
			end = d.skip(x, depth+1)
		}
		if d.err != nil {
			if d.syntax {
				return false, end
			}
			// The localSequenceNumber's errors come first, wherever it is.
			if j >= 0 && !d.lsnValid(v, i, j) {
				return false, end
			}
			if d.err.Param == name {
				d.err.Param = unitParam(i, j, name)
			}
			return false, end
		}
		m, more = d.next(end, '}')
	}
	if j >= 0 && d.err == nil {
		d.checkLSN(lsn, i, j)
	}
	return hasTotal, m
}

// lsnValid checks the localSequenceNumber of container j of
// multipleUnitUsage i, at v, whose members after an error have not been
// read: false, with d.err replaced, when it is missing or not an integer.
func (d *NchfDecoder) lsnValid(v, i, j int) bool {
	err := d.err
	d.err = nil
	var at [1]int
	d.find(v, depthContainer, containerMembers[:], at[:])
	if d.err == nil {
		d.checkLSN(at[0], i, j)
	}
	if d.err != nil {
		return false
	}
	d.err = err
	return true
}

func (d *NchfDecoder) checkLSN(lsn, i, j int) {
	if lsn == 0 {
		d.fail(unitParam(i, j, "/localSequenceNumber"), "mandatory field missing")
		return
	}
	if !isNumber(d.b[lsn]) || !isInt64(d.b[lsn:d.number(lsn)]) {
		d.fail(unitParam(i, j, "/localSequenceNumber"), "must be an integer")
	}
}

// triggers decodes the triggers, at v, of used unit container j of
// multipleUnitUsage i into d.trig (Trigger: triggerCategory mandatory),
// and returns the index past them.
func (d *NchfDecoder) triggers(v, i, j int) int {
	b := d.b
	if b[v] != '[' {
		d.fail(unitParam(i, j, "/triggers"), "must be an array (Trigger)")
		return v
	}
	k := 0
	t, more := d.open(v, ']')
	for more {
		if b[t] != '{' {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)), "must be an object (Trigger)")
			return t
		}
		var at [len(triggerMembers)]int
		end := d.find(t, depthTrigger, triggerMembers[:], at[:])
		if d.err != nil {
			return end
		}
		cat, tt := at[0], at[1]
		if cat == 0 {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerCategory"), "mandatory field missing")
			return end
		}
		if b[cat] != '"' {
			d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerCategory"), "must be a string")
			return end
		}
		if tt != 0 {
			if b[tt] != '"' {
				d.fail(unitParam(i, j, "/triggers/"+strconv.Itoa(k)+"/triggerType"), "must be a string")
				return end
			}
			s, _ := d.strValue(tt)
			d.trig |= ParseTrigger(s)
		}
		k++
		t, more = d.next(end, ']')
	}
	return t
}

// The scanner. Each function takes an index into d.b and returns the
// index past what it read; on a syntax error it calls d.bad and returns
// an index at or before the offending byte, so d.b's final 0 is never
// passed.

// ws returns the index of the first byte at or after i that is not JSON
// white space.
func ws(b []byte, i int) int {
	for {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
}

// open takes the array or object at v: the index of its first element
// (a member's name for an object) and true, or the index past it and
// false when it is empty.
func (d *NchfDecoder) open(v int, end byte) (int, bool) {
	i := ws(d.b, v+1)
	if d.b[i] == end {
		return i + 1, false
	}
	return i, true
}

// next takes the index past an element's value: the index of the next
// element and true, or the index past the enclosing array or object and
// false.
func (d *NchfDecoder) next(i int, end byte) (int, bool) {
	if d.err != nil {
		return i, false
	}
	i = ws(d.b, i)
	switch d.b[i] {
	case ',':
		return ws(d.b, i+1), true
	case end:
		return i + 1, false
	}
	d.bad()
	return i, false
}

// member reads the member at m (at its name's quote): its name, unescaped
// (valid until the next member is read), and the index of its value.
func (d *NchfDecoder) member(m int) ([]byte, int) {
	b := d.b
	if b[m] != '"' {
		d.bad()
		return nil, m
	}
	end, esc := d.scanString(m + 1)
	if d.syntax {
		return nil, end
	}
	key := b[m+1 : end-1]
	if esc {
		d.kbuf = unescape(d.kbuf[:0], key)
		key = d.kbuf
	}
	i := ws(b, end)
	if b[i] != ':' {
		d.bad()
		return nil, i
	}
	return key, ws(b, i+1)
}

// strValue reads the string at v: its bytes unescaped (valid until the
// next string is read) and the index past it.
func (d *NchfDecoder) strValue(v int) ([]byte, int) {
	end, esc := d.scanString(v + 1)
	if d.syntax {
		return nil, end
	}
	s := d.b[v+1 : end-1]
	if esc {
		d.sbuf = unescape(d.sbuf[:0], s)
		s = d.sbuf
	}
	return s, end
}

// plain marks the bytes a string holds as themselves: not a quote, a
// backslash or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString checks the string whose contents start at i and returns the
// index past its closing quote, and whether it holds escapes.
func (d *NchfDecoder) scanString(i int) (int, bool) {
	b := d.b
	esc := false
	for {
		for plain[b[i]] {
			i++
		}
		switch b[i] {
		case '"':
			return i + 1, esc
		case '\\':
			esc = true
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
				continue
			case 'u':
				if isHex(b[i+2]) && isHex(b[i+3]) && isHex(b[i+4]) && isHex(b[i+5]) {
					i += 6
					continue
				}
			}
		}
		d.bad()
		return i, esc
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isNumber(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number checks the number at v (RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?
// ([eE][+-]?[0-9]+)?) and returns the index past it.
func (d *NchfDecoder) number(v int) int {
	b := d.b
	i := v
	if b[i] == '-' {
		i++
	}
	switch {
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for isDigit(b[i]) {
			i++
		}
	default:
		d.bad()
		return i
	}
	if b[i] == '.' {
		if i = d.digits(i + 1); d.syntax {
			return i
		}
	}
	if b[i] == 'e' || b[i] == 'E' {
		i++
		if b[i] == '+' || b[i] == '-' {
			i++
		}
		i = d.digits(i)
	}
	return i
}

// digits checks that one or more digits start at i and returns the index
// past them.
func (d *NchfDecoder) digits(i int) int {
	if !isDigit(d.b[i]) {
		d.bad()
		return i
	}
	for isDigit(d.b[i]) {
		i++
	}
	return i
}

// skip checks the value at v, at depth depth, and returns the index past
// it.
func (d *NchfDecoder) skip(v, depth int) int {
	b := d.b
	if depth > maxDepth {
		d.deep = true
		d.bad()
		return v
	}
	switch b[v] {
	case '"':
		end, _ := d.scanString(v + 1)
		return end
	case '{':
		m, more := d.open(v, '}')
		for more {
			_, x := d.member(m)
			if d.err != nil {
				return x
			}
			m, more = d.next(d.skip(x, depth+1), '}')
		}
		return m
	case '[':
		e, more := d.open(v, ']')
		for more {
			e, more = d.next(d.skip(e, depth+1), ']')
		}
		return e
	case 't':
		if b[v+1] == 'r' && b[v+2] == 'u' && b[v+3] == 'e' {
			return v + 4
		}
	case 'f':
		if b[v+1] == 'a' && b[v+2] == 'l' && b[v+3] == 's' && b[v+4] == 'e' {
			return v + 5
		}
	case 'n':
		if b[v+1] == 'u' && b[v+2] == 'l' && b[v+3] == 'l' {
			return v + 4
		}
	default:
		if isNumber(b[v]) {
			return d.number(v)
		}
	}
	d.bad()
	return v
}

// parseUint parses a JSON number as a uint64: false when it has a sign,
// a fraction or an exponent, or does not fit.
func parseUint(s []byte) (uint64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		x := uint64(c - '0')
		if n > (1<<64-1-x)/10 {
			return 0, false
		}
		n = n*10 + x
	}
	return n, true
}

// isInt64 reports whether a JSON number is an integer that fits an int64.
func isInt64(s []byte) bool {
	limit := uint64(1<<63 - 1)
	if len(s) > 0 && s[0] == '-' {
		s, limit = s[1:], 1<<63
	}
	n, ok := parseUint(s)
	return ok && n <= limit
}

// unescape appends s, the contents of a JSON string, unescaped to dst, as
// fastjson does (an escaped lone surrogate is kept as it was sent).
func unescape(dst, s []byte) []byte {
	for len(s) > 0 {
		n := bytes.IndexByte(s, '\\')
		if n < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:n]...)
		s = s[n+1:]
		if len(s) == 0 {
			return append(dst, '\\')
		}
		c := s[0]
		s = s[1:]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			x, ok := hex4(s)
			if !ok {
				dst = append(dst, '\\', 'u')
				break
			}
			xs := s[:4]
			s = s[4:]
			if !utf16.IsSurrogate(x) {
				dst = utf8.AppendRune(dst, x)
				break
			}
			y, ok := rune(0), len(s) >= 6 && s[0] == '\\' && s[1] == 'u'
			if ok {
				y, ok = hex4(s[2:])
			}
			if !ok {
				dst = append(dst, '\\', 'u')
				dst = append(dst, xs...)
				break
			}
			dst = utf8.AppendRune(dst, utf16.DecodeRune(x, y))
			s = s[6:]
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
	}
	return dst
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var x rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			x = x<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			x = x<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			x = x<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return x, true
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
