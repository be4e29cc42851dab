package chf

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

// refDecoder is the fastjson-tree decoder the single-pass NchfDecoder
// replaced, kept as the oracle of TestNchfDecodeMatchesReference and
// FuzzNchfDecodeMatchesReference: for every body both accept or refuse
// alike, with the same JSON Pointer and reason (the text of a
// malformed-JSON reason aside), and decode the same request. Its one
// change is the bound on usage lines, now over all multipleUnitUsage
// members of a body (it was per member).
type refDecoder struct {
	p    fastjson.Parser
	err  *FieldError
	trig Triggers // triggers of the container being decoded
	// offline: the container being decoded is OFFLINE_CHARGING.
	offline bool
}

// Decode parses body into r. It returns a *FieldError for a malformed
// body, a missing mandatory field or a wrong type. r does not keep
// references to body.
func (d *refDecoder) Decode(body []byte, r *NchfRequest) error {
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
	// A member the decoder reads given twice comes before any other error.
	if fe := refDup(o, refRequestKind, ""); fe != nil {
		return fe
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
			nfHash = refHashFields(v, "nodeFunctionality", "nFName", "nFIPv4Address", "nFIPv6Address", "nFFqdn")
		case "pduSessionChargingInformation":
			pduHash = refHashFields(v, "chargingId", "chargingIdentifier")
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
	r.Key = HashUint(HashUint(h, pduHash), tsHash)
	return nil
}

// refKind is what the reference knows of an object it reads: the
// members read in it, and the kind of the objects (alone, or in an array)
// some of them hold.
type refKind struct {
	read     []string
	children map[string]*refKind
	arrays   map[string]*refKind
}

var (
	refTriggerKind   = &refKind{read: []string{"triggerCategory", "triggerType"}}
	refContainerKind = &refKind{read: []string{"localSequenceNumber", "time", "totalVolume", "uplinkVolume", "downlinkVolume",
		"serviceSpecificUnits", "quotaManagementIndicator", "triggers"}, arrays: map[string]*refKind{"triggers": refTriggerKind}}
	refRequestedKind = &refKind{read: []string{"time", "totalVolume", "uplinkVolume", "downlinkVolume", "serviceSpecificUnits"}}
	refUsageKind     = &refKind{read: []string{"ratingGroup", "requestedUnit", "usedUnitContainer"},
		children: map[string]*refKind{"requestedUnit": refRequestedKind}, arrays: map[string]*refKind{"usedUnitContainer": refContainerKind}}
	refRequestKind = &refKind{
		read: []string{"subscriberIdentifier", "nfConsumerIdentification", "pduSessionChargingInformation",
			"invocationTimeStamp", "invocationSequenceNumber", "retransmissionIndicator", "oneTimeEvent",
			"oneTimeEventType", "multipleUnitUsage", "notifyUri", "tenantIdentifier", "mnSConsumerIdentifier",
			"serviceSpecificationInfo", "supportedFeatures"},
		children: map[string]*refKind{
			"nfConsumerIdentification":      {read: []string{"nodeFunctionality", "nFName", "nFIPv4Address", "nFIPv6Address", "nFFqdn"}},
			"pduSessionChargingInformation": {read: []string{"chargingId", "chargingIdentifier"}},
		},
		arrays: map[string]*refKind{"multipleUnitUsage": refUsageKind},
	}
)

// refDup returns the first member (in the body's order, depth first) of
// the objects the decoder reads that is given twice in its object.
func refDup(o *fastjson.Object, k *refKind, ptr string) *FieldError {
	seen := map[string]bool{}
	var fe *FieldError
	o.Visit(func(key []byte, v *fastjson.Value) {
		if fe != nil {
			return
		}
		name := string(key)
		if slices.Contains(k.read, name) {
			if seen[name] {
				fe = &FieldError{Param: ptr + "/" + name, Reason: ReasonDuplicate}
				return
			}
			seen[name] = true
		}
		if c := k.children[name]; c != nil && v.Type() == fastjson.TypeObject {
			fe = refDup(v.GetObject(), c, ptr+"/"+name)
		}
		if c := k.arrays[name]; c != nil && v.Type() == fastjson.TypeArray {
			for i, e := range v.GetArray() {
				if e.Type() == fastjson.TypeObject {
					if fe = refDup(e.GetObject(), c, ptr+"/"+name+"/"+strconv.Itoa(i)); fe != nil {
						return
					}
				}
			}
		}
	})
	return fe
}

// hashFields hashes the named members of object v, in the order named
// (so the members' order in the body does not matter), as they were sent.
func refHashFields(v *fastjson.Value, names ...string) uint64 {
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

func (d *refDecoder) fail(param, reason string) {
	if d.err == nil {
		d.err = &FieldError{Param: param, Reason: reason}
	}
}

func (d *refDecoder) str(v *fastjson.Value, param string) ([]byte, bool) {
	if v.Type() != fastjson.TypeString {
		d.fail(param, "must be a string")
		return nil, false
	}
	b, _ := v.StringBytes()
	return b, true
}

func (d *refDecoder) bool(v *fastjson.Value, param string) bool {
	b, err := v.Bool()
	if err != nil {
		d.fail(param, "must be a boolean")
	}
	return b
}

func (d *refDecoder) uint64(v *fastjson.Value, param string) uint64 {
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

func (d *refDecoder) uint32(v *fastjson.Value, param string) uint32 {
	n := d.uint64(v, param)
	if n > 1<<32-1 {
		d.fail(param, "must be an unsigned 32-bit integer")
		return 0
	}
	return uint32(n)
}

func (d *refDecoder) decodeNF(v *fastjson.Value, r *NchfRequest) {
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

func (d *refDecoder) decodeMUUs(v *fastjson.Value, r *NchfRequest) {
	arr, err := v.Array()
	if err != nil {
		d.fail("/multipleUnitUsage", "must be an array (MultipleUnitUsage)")
		return
	}
	if len(r.Lines)+len(arr) > MaxUsageLines {
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
			hasTotal := d.units(ru, &line.Requested, i, -1)
			if q := &line.Requested; !hasTotal && q.UplinkVolume+q.DownlinkVolume < q.UplinkVolume {
				d.fail(unitParam(i, -1, ""), "uplinkVolume + downlinkVolume overflows 64 bits")
			}
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
func (d *refDecoder) units(v *fastjson.Value, u *Units, i, j int) (hasTotal bool) {
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
func (d *refDecoder) triggers(v *fastjson.Value, i, j int) {
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

// sameDecode decodes body with d and the reference and fails t unless
// they agree.
func sameDecode(t *testing.T, d *NchfDecoder, ref *refDecoder, body []byte) {
	t.Helper()
	var got, want NchfRequest
	gerr, werr := d.Decode(body, &got), ref.Decode(body, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("body %q: decoder says %v, the reference %v", body, gerr, werr)
	}
	if werr != nil {
		var g, w *FieldError
		if !errors.As(gerr, &g) || !errors.As(werr, &w) {
			t.Fatalf("body %q: errors %T and %T", body, gerr, werr)
		}
		if w.Param == "" && strings.HasPrefix(w.Reason, "malformed JSON") {
			if g.Param != "" || !strings.HasPrefix(g.Reason, "malformed JSON") {
				t.Fatalf("body %q: decoder says %v, the reference %v", body, gerr, werr)
			}
			return
		}
		if *g != *w {
			t.Fatalf("body %q: decoder says %v, the reference %v", body, gerr, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\ndecoded   %+v\nreference %+v", body, got, want)
	}
}

// nchfCases are bodies that reach every branch of the decoder: each
// mandatory field missing and mistyped, duplicate members, escapes in
// names and strings, nesting at fastjson's depth bound.
func nchfCases() []string {
	head := `"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1`
	muu := func(s string) string { return `{` + head + `,"multipleUnitUsage":[` + s + `]}` }
	cases := []string{
		validCreate, ``, ` `, `[]`, `"x"`, `1`, `null`, `{}`, `{"a":1}{}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}",
		`{` + head + `}`,
		`{"subscriberIdentifier":"imsi-1",` + head + `}`,
		`{"subscriberIdentifier":"",` + head + `}`,
		`{"subscriberIdentifier":1,` + head + `}`,
		`{"subscriberIdentifier":"im\u0073i-\"1\\",` + head + `}`,
		`{"subscriber\u0049dentifier":"imsi-2",` + head + `}`,
		`{"subscriberIdentifier":"a","subscriberIdentifier":"b",` + head + `}`,
		`{"subscriberIdentifier":"\ud83d\ude00\ud800x\udc00\ud800\u0041",` + head + `}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"}}`,
		`{"nfConsumerIdentification":[],"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":5},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nFName":"x","nodeFunctionality":"PGW_C_SMF","nodeFunctionality":"SMSF","nFIPv4Address":"10.0.0.1","nFFqdn":7},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"AMF","nFName":{"a":[1,"}"]}},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1,"nfConsumerIdentification":{"nodeFunctionality":"SMF"}}`,
		`{"pduSessionChargingInformation":{"chargingId":7,"chargingIdentifier":"a\tb"},` + head + `}`,
		`{"pduSessionChargingInformation":{"chargingId":-7,"chargingId":8},` + head + `}`,
		`{"pduSessionChargingInformation":"x",` + head + `}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":1,"invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"yesterday","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z"}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":-1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":4294967296}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1e3}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":"1"}`,
		`{` + head + `,"retransmissionIndicator":true,"oneTimeEvent":false,"oneTimeEventType":"PEC"}`,
		`{` + head + `,"retransmissionIndicator":null}`,
		`{` + head + `,"oneTimeEvent":"true"}`,
		`{` + head + `,"oneTimeEventType":"XYZ","notifyUri":"http://a/b\/c"}`,
		`{` + head + `,"oneTimeEventType":1}`,
		`{` + head + `,"notifyUri":[]}`,
		`{` + head + `,"tenantIdentifier":"t","supportedFeatures":"0"}`,
		`{` + head + `,"mnSConsumerIdentifier":{}}`,
		`{` + head + `,"multipleUnitUsage":{}}`,
		muu(``), muu(`1`), muu(`{}`), muu(`{"ratingGroup":"1"}`), muu(`{"ratingGroup":-1}`), muu(`{"ratingGroup":1.5}`),
		muu(`{"ratingGroup":4294967296}`), muu(`{"ratingGroup":18446744073709551616}`),
		muu(`{"ratingGroup":1},{"ratingGroup":1}`),
		muu(`{"ratingGroup":1,"ratingGroup":2},{"ratingGroup":2}`),
		muu(`{"requestedUnit":{"time":-1},"ratingGroup":1}`),
		muu(`{"ratingGroup":1,"requestedUnit":[]}`),
		muu(`{"ratingGroup":1,"requestedUnit":{"time":4294967296}}`),
		muu(`{"ratingGroup":1,"requestedUnit":{"totalVolume":1,"uplinkVolume":2,"downlinkVolume":3,"serviceSpecificUnits":4,"time":5,"triggers":7,"quotaManagementIndicator":1}}`),
		muu(`{"ratingGroup":1,"requestedUnit":{"time":1},"requestedUnit":{"time":"x"}}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":{}}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[1]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":"1"}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1.5}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":-9223372036854775808},{"localSequenceNumber":9223372036854775808}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"time":"x","localSequenceNumber":1}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"uplinkVolume":18446744073709551615,"downlinkVolume":1}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":18446744073709551615},{"localSequenceNumber":2,"totalVolume":1}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"quotaManagementIndicator":"OFFLINE_CHARGING"},{"localSequenceNumber":2}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"quotaManagementIndicator":"OFFLINE_CHARGING","quotaManagementIndicator":"ONLINE_CHARGING"}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"quotaManagementIndicator":"OFFLINE_CHARGING","totalVolume":9}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"quotaManagementIndicator":2}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":{}}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[1]}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{}]}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{"triggerCategory":1}]}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{"triggerCategory":"IMMEDIATE_REPORT","triggerType":2}]}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{"triggerCategory":"IMMEDIATE_REPORT","triggerType":"FINAL","triggerType":"QUOTA_THRESHOLD"}],"triggers":[{"triggerCategory":"x","triggerType":"VALIDITY_TIME"}]}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"time":1,"triggers":[{"triggerCategory":"IMMEDIATE_REPORT","trigger\u0054ype":"FIN\u0041L"}]}]}`),
		`{` + head + `,"multipleUnitUsage":[{"ratingGroup":1}],"multipleUnitUsage":[{"ratingGroup":2}]}`,
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5}],"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":7}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5,"totalVolume":7}]}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"localSequenceNumber":2}]}`),
		muu(`{"ratingGroup":"x","requestedUnit":{"time":1,"t\u0069me":2}}`),
		muu(`{"ratingGroup":1,"requestedUnit":{"quotaManagementIndicator":1,"quotaManagementIndicator":2,"x":1,"x":2}}`),
		muu(`{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{"triggerCategory":"A"},{"triggerCategory":"A","triggerCategory":"B"}]}]}`),
		`{"invocationSequenceNumber":"x",` + head + `}`,
		`{"notifyUri":"http://a","notifyUri":"http://b","x":1,"x":2,` + head + `}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a","nFName":"b"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{"nfConsumerIdentification":{"nodeFunctionality":"SMF","other":1,"other":2},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1}`,
		`{` + head + `,"multipleUnitUsage":[{"ratingGroup":1,"ratingGroup":1}],"oneTimeEvent":true,"oneTimeEvent":true}`,
		`{` + head + `,"multipleUnitUsage":[{"ratingGroup":1}],"multipleUnitUsage":[{"ratingGroup":1}]}`,
	}
	var many []string
	for k := range MaxUsageLines + 1 {
		many = append(many, `{"ratingGroup":`+strconv.Itoa(k)+`}`)
	}
	cases = append(cases, muu(strings.Join(many[:MaxUsageLines], ",")), muu(strings.Join(many, ",")),
		`{`+head+`,"multipleUnitUsage":[`+strings.Join(many[:40], ",")+`],"multipleUnitUsage":[`+strings.Join(many[40:], ",")+`]}`)
	for _, n := range []int{298, 299, 300, 301} {
		cases = append(cases,
			`{`+head+`,"x":`+strings.Repeat("[", n)+strings.Repeat("]", n)+`}`,
			`{`+head+`,"x":`+strings.Repeat("[", n)+"1"+strings.Repeat("]", n)+`}`,
			`{`+head+`,"x":"`+strings.Repeat("[", n)+`"}`)
	}
	return cases
}

func TestNchfDecodeMatchesReference(t *testing.T) {
	var d NchfDecoder
	var ref refDecoder
	cases := nchfCases()
	for _, c := range cases {
		sameDecode(t, &d, &ref, []byte(c))
	}
	// Mutations of the cases: bytes changed, deleted and doubled, members
	// moved; the seed is fixed, so a failure reproduces.
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]",:\ 0123456789-+.eEtrufalsn` + "\x01\t")
	for range 20000 {
		b := []byte(cases[rnd.IntN(len(cases))])
		for range 1 + rnd.IntN(3) {
			if len(b) == 0 {
				break
			}
			p := rnd.IntN(len(b))
			switch rnd.IntN(4) {
			case 0:
				b[p] = alphabet[rnd.IntN(len(alphabet))]
			case 1:
				b = append(b[:p], b[p+1:]...)
			case 2:
				q := p + rnd.IntN(len(b)-p)
				b = append(b[:q], append(append([]byte(nil), b[p:q]...), b[q:]...)...)
			case 3:
				b = append(b[:p], append([]byte{alphabet[rnd.IntN(len(alphabet))]}, b[p:]...)...)
			}
		}
		sameDecode(t, &d, &ref, b)
	}
}

// FuzzNchfDecodeMatchesReference runs the comparison on fuzzed bodies
// (go test -fuzz FuzzNchfDecodeMatchesReference ./chf/).
func FuzzNchfDecodeMatchesReference(f *testing.F) {
	for _, c := range nchfCases() {
		f.Add([]byte(c))
	}
	var d NchfDecoder
	var ref refDecoder
	f.Fuzz(func(t *testing.T, body []byte) {
		sameDecode(t, &d, &ref, body)
	})
}

// TestNchfDecodeBounds checks the two bounds directly: usage lines over
// all multipleUnitUsage members of a body, and nesting depth.
func TestNchfDecodeBounds(t *testing.T) {
	head := `"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1`
	entries := func(from, to int) string {
		var e []string
		for k := from; k < to; k++ {
			e = append(e, `{"ratingGroup":`+strconv.Itoa(k)+`}`)
		}
		return strings.Join(e, ",")
	}
	var d NchfDecoder
	var r NchfRequest
	var fe *FieldError
	over := `{` + head + `,"multipleUnitUsage":[` + entries(0, MaxUsageLines+1) + `]}`
	if err := d.Decode([]byte(over), &r); !errors.As(err, &fe) || fe.Param != "/multipleUnitUsage" {
		t.Fatalf("%d lines: %v", MaxUsageLines+1, err)
	}
	full := `{` + head + `,"multipleUnitUsage":[` + entries(0, MaxUsageLines) + `]}`
	if err := d.Decode([]byte(full), &r); err != nil || len(r.Lines) != MaxUsageLines {
		t.Fatalf("%d lines: %v, %d lines", MaxUsageLines, err, len(r.Lines))
	}
	// Two multipleUnitUsage members are refused, not added up.
	split := `{` + head + `,"multipleUnitUsage":[` + entries(0, 40) + `],"multipleUnitUsage":[` + entries(40, MaxUsageLines) + `]}`
	if err := d.Decode([]byte(split), &r); !errors.As(err, &fe) || fe.Param != "/multipleUnitUsage" || fe.Reason != ReasonDuplicate {
		t.Fatalf("two multipleUnitUsage members: %v", err)
	}
	// fastjson's bound: a value inside 300 arrays is too deep, inside
	// 299 it is not (the body's object is one of them).
	nest := func(n int) []byte {
		return []byte(`{` + head + `,"x":` + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + `}`)
	}
	if err := d.Decode(nest(maxDepth-2), &r); err != nil {
		t.Fatalf("%d deep: %v", maxDepth-1, err)
	}
	if err := d.Decode(nest(maxDepth-1), &r); !errors.As(err, &fe) || fe.Param != "" || !strings.HasPrefix(fe.Reason, "malformed JSON: nested") {
		t.Fatalf("%d deep: %v", maxDepth, err)
	}
}
