package diameter

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/chf/checked"
)

// maxSessionKey is the longest Session-Id passed to the core verbatim;
// longer ones are replaced by the hex SHA-256 of the Session-Id.
const maxSessionKey = 64

// mscc is one decoded Multiple-Services-Credit-Control.
type mscc struct {
	ratingGroup uint32
	hasRG       bool
	requested   bool // Requested-Service-Unit present (possibly empty)
	rsu         chf.Units
	used        chf.Units
	usedRaw     []byte       // the last Used-Service-Unit AVP (Failed-AVP of an overflow)
	rsuRaw      []byte       // the Requested-Service-Unit AVP (idem, for an event)
	reported    chf.Triggers // Reporting-Reason values, as triggers
}

// ccr is a decoded Credit-Control-Request. Byte slices alias the message
// buffer. The zero value is ready; reset clears it keeping capacity.
type ccr struct {
	hdr            wire.Header
	sessionID      []byte // payload
	sessionIDRaw   []byte // whole AVP, echoed in the answer
	originHost     []byte
	originRealm    []byte
	destRealm      bool
	authApp        uint32
	hasAuthApp     bool
	serviceContext bool
	reqType        uint32
	hasReqType     bool
	reqNumber      uint32
	hasReqNumber   bool
	action         uint32
	hasAction      bool
	subType        uint32 // of the chosen Subscription-Id
	subData        []byte
	subRaw         []byte
	hasSub         bool
	lines          []mscc

	// Set when decoding fails: the Result-Code and Failed-AVP content
	// (one AVP, as it was received or a zero-filled example).
	result uint32
	failed []byte
}

func (c *ccr) reset() {
	lines, failed := c.lines[:0], c.failed[:0]
	*c = ccr{lines: lines, failed: failed}
}

// fail records the first failure only.
func (c *ccr) fail(result uint32, avp []byte) {
	if c.result != 0 {
		return
	}
	c.result = result
	c.failed = append(c.failed[:0], avp...)
}

// failMissing records a missing AVP with a zero-filled example of it.
func (c *ccr) failMissing(code uint32, vendor uint32, dataLen int) {
	if c.result != 0 {
		return
	}
	var zero [8]byte
	c.result = wire.ResultMissingAVP
	c.failed = wire.AppendBytes(c.failed[:0], code, wire.AVPMandatory, vendor, zero[:dataLen])
}

// u32 decodes an Unsigned32 AVP, failing the request on a bad length.
func (c *ccr) u32(a *wire.AVP) (uint32, bool) {
	v, ok := wire.Uint32(a.Data)
	if !ok {
		c.fail(wire.ResultInvalidAVPLength, a.Raw)
	}
	return v, ok
}

func (c *ccr) u64(a *wire.AVP) (uint64, bool) {
	v, ok := wire.Uint64(a.Data)
	if !ok {
		c.fail(wire.ResultInvalidAVPLength, a.Raw)
	}
	return v, ok
}

// decodeCCR decodes msg (a whole CCR) into c without allocating beyond
// c's reusable slices. On return c.result is 0 when the request is valid
// or the Diameter Result-Code to answer with, c.failed holding the
// Failed-AVP content. Unknown AVPs are ignored, even with the M bit: real
// PGWs send many 3GPP AVPs the CGW does not need.
func decodeCCR(msg []byte, c *ccr) {
	c.reset()
	h, err := wire.ParseHeader(msg)
	if err != nil || int(h.Length) != len(msg) {
		c.result = wire.ResultInvalidHdrBits
		return
	}
	c.hdr = h
	it := wire.MessageIter(msg)
	var a wire.AVP
	for it.Next(&a) {
		if a.Vendor != 0 {
			continue
		}
		switch a.Code {
		case wire.CodeSessionID:
			if c.sessionIDRaw == nil {
				c.sessionID, c.sessionIDRaw = a.Data, a.Raw
			}
		case wire.CodeOriginHost:
			c.originHost = a.Data
		case wire.CodeOriginRealm:
			c.originRealm = a.Data
		case wire.CodeDestinationRealm:
			c.destRealm = true
		case wire.CodeAuthApplicationID:
			c.authApp, c.hasAuthApp = c.u32(&a)
		case wire.CodeServiceContextID:
			c.serviceContext = true
		case wire.CodeCCRequestType:
			c.reqType, c.hasReqType = c.u32(&a)
		case wire.CodeCCRequestNumber:
			c.reqNumber, c.hasReqNumber = c.u32(&a)
		case wire.CodeRequestedAction:
			c.action, c.hasAction = c.u32(&a)
		case wire.CodeSubscriptionID:
			c.decodeSubscription(&a)
		case wire.CodeMSCC:
			c.decodeMSCC(&a)
		}
	}
	if it.Err() != nil {
		c.result = 0 // framing errors take precedence: the rest is unreliable
		c.fail(wire.ResultInvalidAVPLength, it.Bad())
		return
	}
	if c.result != 0 {
		return
	}
	c.validate()
}

func (c *ccr) decodeSubscription(g *wire.AVP) {
	var typ uint32
	var data []byte
	hasType, hasData := false, false
	it := wire.NewIter(g.Data)
	var a wire.AVP
	for it.Next(&a) {
		switch {
		case a.Vendor != 0:
		case a.Code == wire.CodeSubscriptionIDType:
			typ, hasType = c.u32(&a)
		case a.Code == wire.CodeSubscriptionIDData:
			data, hasData = a.Data, true
		}
	}
	if it.Err() != nil {
		c.fail(wire.ResultInvalidAVPLength, it.Bad())
		return
	}
	if !hasType {
		c.failMissing(wire.CodeSubscriptionIDType, 0, 4)
		return
	}
	if !hasData {
		c.failMissing(wire.CodeSubscriptionIDData, 0, 0)
		return
	}
	switch typ {
	case wire.SubscriptionIMSI:
		if !digits(data, 5, 15) {
			c.fail(wire.ResultInvalidAVPValue, g.Raw)
			return
		}
	case wire.SubscriptionE164:
		if !digits(data, 1, 15) {
			c.fail(wire.ResultInvalidAVPValue, g.Raw)
			return
		}
		if c.hasSub {
			return // an IMSI or earlier E.164 wins
		}
	default:
		if !c.hasSub {
			// Remember it: it fails the request unless an IMSI or
			// E.164 Subscription-Id follows.
			c.subType, c.subRaw = typ, g.Raw
		}
		return
	}
	if c.hasSub && c.subType == wire.SubscriptionIMSI {
		return
	}
	c.subType, c.subData, c.subRaw, c.hasSub = typ, data, g.Raw, true
}

func digits(b []byte, lo, hi int) bool {
	if len(b) < lo || len(b) > hi {
		return false
	}
	for _, d := range b {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

func (c *ccr) decodeMSCC(g *wire.AVP) {
	var m mscc
	it := wire.NewIter(g.Data)
	var a wire.AVP
	for it.Next(&a) {
		if a.Vendor == wire.Vendor3GPP && a.Code == wire.CodeReportingReason {
			c.reason(&a, &m)
			continue
		}
		if a.Vendor != 0 {
			continue
		}
		switch a.Code {
		case wire.CodeRatingGroup:
			m.ratingGroup, m.hasRG = c.u32(&a)
		case wire.CodeRequestedServiceUnit:
			m.requested, m.rsuRaw = true, a.Raw
			if hasTotal := c.decodeUnits(&a, &m.rsu); c.result == 0 {
				if _, ok := m.rsu.Volume(hasTotal); !ok {
					c.fail(wire.ResultInvalidAVPValue, a.Raw)
				}
			}
		case wire.CodeUsedServiceUnit:
			// Several are summed, each counted as reported: its
			// CC-Total-Octets when present, else input + output.
			var u chf.Units
			hasTotal := c.decodeUnits(&a, &u)
			in := wire.NewIter(a.Data)
			var r wire.AVP
			for in.Next(&r) {
				if r.Vendor == wire.Vendor3GPP && r.Code == wire.CodeReportingReason {
					c.reason(&r, &m)
				}
			}
			m.usedRaw = a.Raw
			vol, ok := u.Volume(hasTotal)
			if !ok || !m.used.Add(u, vol) {
				c.fail(wire.ResultInvalidAVPValue, a.Raw)
			}
		}
	}
	if it.Err() != nil {
		c.fail(wire.ResultInvalidAVPLength, it.Bad())
		return
	}
	if !m.hasRG {
		c.failMissing(wire.CodeRatingGroup, 0, 4)
		return
	}
	for i := range c.lines {
		if c.lines[i].ratingGroup == m.ratingGroup && c.result == 0 {
			// A rating group in two MSCCs: refused (5004 naming the
			// Rating-Group) rather than granted twice on one reservation.
			c.fail(wire.ResultInvalidAVPValue, wire.AppendUint32(c.failed[:0], wire.CodeRatingGroup, wire.AVPMandatory, 0, m.ratingGroup))
			return
		}
	}
	c.lines = append(c.lines, m)
}

// reason adds a Reporting-Reason (MSCC or Used-Service-Unit level) to the
// triggers the MSCC reports.
func (c *ccr) reason(a *wire.AVP, m *mscc) {
	v, ok := c.u32(a)
	if !ok {
		return
	}
	switch v {
	case wire.ReasonThreshold:
		m.reported |= chf.TriggerQuotaThreshold
	case wire.ReasonQHT:
		m.reported |= chf.TriggerQHT
	case wire.ReasonFinal:
		m.reported |= chf.TriggerFinal
	case wire.ReasonQuotaExhausted:
		m.reported |= chf.TriggerQuotaExhausted
	case wire.ReasonValidityTime:
		m.reported |= chf.TriggerValidityTime
	case wire.ReasonForcedReauth:
		m.reported |= chf.TriggerForcedReauth
	default:
		m.reported |= chf.TriggerOther
	}
}

// decodeUnits adds the units of a *-Service-Unit AVP to u (a unit AVP
// repeated inside it is summed); it reports whether CC-Total-Octets was
// present. A sum that overflows fails the request with 5004, the AVP that
// overflowed as Failed-AVP.
func (c *ccr) decodeUnits(g *wire.AVP, u *chf.Units) (hasTotal bool) {
	it := wire.NewIter(g.Data)
	var a wire.AVP
	for it.Next(&a) {
		if a.Vendor != 0 {
			continue
		}
		var sum *uint64
		switch a.Code {
		case wire.CodeCCTime:
			if v, ok := c.u32(&a); ok {
				if u.Time, ok = checked.AddU32(u.Time, v); !ok {
					c.fail(wire.ResultInvalidAVPValue, a.Raw)
				}
			}
		case wire.CodeCCTotalOctets:
			sum, hasTotal = &u.TotalVolume, true
		case wire.CodeCCInputOctets:
			sum = &u.UplinkVolume
		case wire.CodeCCOutputOctets:
			sum = &u.DownlinkVolume
		case wire.CodeCCServiceSpecificUnits:
			sum = &u.ServiceSpecific
		}
		if sum != nil {
			if v, ok := c.u64(&a); ok {
				if *sum, ok = checked.AddU64(*sum, v); !ok {
					c.fail(wire.ResultInvalidAVPValue, a.Raw)
				}
			}
		}
	}
	if it.Err() != nil {
		c.fail(wire.ResultInvalidAVPLength, it.Bad())
	}
	return hasTotal
}

// validate checks the AVPs RFC 4006 makes mandatory, plus Subscription-Id
// (the core keys sessions by subscriber) and Requested-Action on EVENT.
func (c *ccr) validate() {
	switch {
	case c.sessionIDRaw == nil:
		c.failMissing(wire.CodeSessionID, 0, 0)
	case c.originHost == nil:
		c.failMissing(wire.CodeOriginHost, 0, 0)
	case c.originRealm == nil:
		c.failMissing(wire.CodeOriginRealm, 0, 0)
	case !c.destRealm:
		c.failMissing(wire.CodeDestinationRealm, 0, 0)
	case !c.hasAuthApp:
		c.failMissing(wire.CodeAuthApplicationID, 0, 4)
	case c.authApp != wire.AppCreditControl:
		c.fail(wire.ResultInvalidAVPValue, wire.AppendUint32(nil, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, c.authApp))
	case !c.serviceContext:
		c.failMissing(wire.CodeServiceContextID, 0, 0)
	case !c.hasReqType:
		c.failMissing(wire.CodeCCRequestType, 0, 4)
	case c.reqType < wire.RequestInitial || c.reqType > wire.RequestEvent:
		c.fail(wire.ResultInvalidAVPValue, wire.AppendUint32(nil, wire.CodeCCRequestType, wire.AVPMandatory, 0, c.reqType))
	case !c.hasReqNumber:
		c.failMissing(wire.CodeCCRequestNumber, 0, 4)
	case !c.hasSub && c.subRaw != nil:
		c.fail(wire.ResultInvalidAVPValue, c.subRaw) // only unsupported types
	case !c.hasSub:
		c.failMissing(wire.CodeSubscriptionID, 0, 0)
	case c.reqType == wire.RequestEvent && !c.hasAction:
		c.failMissing(wire.CodeRequestedAction, 0, 4)
	case c.reqType == wire.RequestEvent && c.action != wire.ActionDirectDebiting && c.action != wire.ActionCheckBalance:
		c.fail(wire.ResultInvalidAVPValue, wire.AppendUint32(nil, wire.CodeRequestedAction, wire.AVPMandatory, 0, c.action))
	}
}

// op is the charging operation of a valid CCR.
func (c *ccr) op() chf.Op {
	switch c.reqType {
	case wire.RequestInitial:
		return chf.OpCreate
	case wire.RequestUpdate:
		return chf.OpUpdate
	case wire.RequestTermination:
		return chf.OpRelease
	}
	if c.action == wire.ActionCheckBalance {
		return chf.OpBalance
	}
	return chf.OpEvent
}

// fill maps a valid CCR onto req, reusing req.Lines. It allocates the
// SUPI and Session strings (the core may keep strings it is handed).
func (c *ccr) fill(req *chf.ChargeRequest) {
	req.Op = c.op()
	req.SUPI = supi(c.subType, c.subData)
	req.Session = ""
	if req.Op != chf.OpBalance {
		req.Session = sessionKey(c.sessionID)
	}
	req.Seq = c.reqNumber
	// The Session-Id and CC-Request-Number identify a Gy request; the
	// core answers a repeat from the record whether or not T is set.
	req.Key = 0
	// A CCR-E is charged line by line: a Multiple-Services-Credit-Control
	// with Used-Service-Unit after delivery (PEC: debited, overage beyond
	// the balance), one with Requested-Service-Unit only before it
	// (DIRECT_DEBITING as IEC: refused with 4012 when not covered).
	req.Event = chf.EventUnspecified
	req.Lines = req.Lines[:0]
	req.Notify = req.Notify[:0]
	if req.Op == chf.OpBalance {
		return
	}
	if req.Op == chf.OpCreate {
		// Where a RAR or ASR for the session goes: the peer and the
		// Session-Id (see NotifyTarget).
		req.Notify = AppendNotifyTarget(req.Notify, c.originHost, c.sessionID)
	}
	for i := range c.lines {
		m := &c.lines[i]
		req.Lines = append(req.Lines, chf.UsageLine{
			RatingGroup: m.ratingGroup,
			Used:        m.used,
			Request:     m.requested,
			Requested:   m.rsu,
			Reported:    m.reported,
		})
	}
}

// supi maps a Subscription-Id onto the account key: IMSI → "imsi-<digits>"
// (the form accounts are provisioned under), E.164 → "msisdn-<digits>"
// (a GPSI; such accounts exist only if provisioned under that key).
func supi(typ uint32, data []byte) string {
	prefix := "imsi-"
	if typ == wire.SubscriptionE164 {
		prefix = "msisdn-"
	}
	var buf [32]byte
	b := append(append(buf[:0], prefix...), data...)
	return string(b)
}

// sessionKey maps a Session-Id onto the core's session key: verbatim when
// at most 64 bytes, else the 64 hex digits of its SHA-256.
func sessionKey(id []byte) string {
	if len(id) <= maxSessionKey {
		return string(id)
	}
	sum := sha256.Sum256(id)
	var buf [64]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}
