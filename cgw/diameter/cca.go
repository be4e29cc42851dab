package diameter

import (
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
)

// resultCode maps a core result onto a Diameter Result-Code.
func resultCode(r chf.Result) uint32 {
	switch r {
	case chf.ResultSuccess:
		return wire.ResultSuccess
	case chf.ResultQuotaLimitReached:
		return wire.ResultCreditLimitReached
	case chf.ResultEndUserServiceDenied:
		return wire.ResultEndUserServiceDenied
	case chf.ResultUserUnknown:
		return wire.ResultUserUnknown
	case chf.ResultRatingFailed:
		return wire.ResultRatingFailed
	case chf.ResultSessionUnknown:
		return wire.ResultUnknownSessionID
	case chf.ResultStaleSequence, chf.ResultSequenceReused, chf.ResultReplayMismatch:
		return wire.ResultInvalidAVPValue // Failed-AVP: CC-Request-Number
	case chf.ResultOverflow:
		return wire.ResultInvalidAVPValue // Failed-AVP: see overflowAVP
	case chf.ResultOverloaded:
		return wire.ResultTooBusy
	}
	return wire.ResultUnableToComply // ResultInvalid and anything unknown
}

// overflowAVP is the Failed-AVP of a ResultOverflow answer: the
// Used-Service-Unit (an event without one: the Requested-Service-Unit) of
// the first MSCC whose units the core could not rate or add to the
// account without overflow (lines answer c.lines in order), else nil.
func (c *ccr) overflowAVP(lines []chf.GrantLine) []byte {
	for i := range lines {
		if lines[i].Result == chf.ResultOverflow && i < len(c.lines) {
			if m := &c.lines[i]; m.usedRaw != nil {
				return m.usedRaw
			}
			return c.lines[i].rsuRaw
		}
	}
	return nil
}

// isProtocolError reports whether a Result-Code is a 3xxx protocol error,
// answered with the E bit set.
func isProtocolError(code uint32) bool { return code >= 3000 && code < 4000 }

// currency is an ISO 4217 currency: numeric code and minor unit digits.
type currency struct {
	code     uint32
	exponent int32
}

var currencies = map[string]currency{
	"EUR": {978, 2}, "USD": {840, 2}, "GBP": {826, 2}, "CHF": {756, 2},
	"SEK": {752, 2}, "NOK": {578, 2}, "DKK": {208, 2}, "PLN": {985, 2},
	"CZK": {203, 2}, "HUF": {348, 2}, "RON": {946, 2}, "INR": {356, 2},
	"CNY": {156, 2}, "BRL": {986, 2}, "ZAR": {710, 2}, "AUD": {36, 2},
	"CAD": {124, 2}, "JPY": {392, 0}, "KRW": {410, 0},
}

// answer is everything the CCA encoder needs besides the request.
type answer struct {
	result     uint32
	failed     []byte // Failed-AVP content, or nil
	op         chf.Op
	resp       *chf.ChargeResponse // nil when the core was not called
	defaultCur string
}

// appendCCA appends a complete CCA for the request c (which may have
// failed to decode) to dst. The constant Origin-Host/Origin-Realm/
// Auth-Application-Id AVPs come pre-encoded in ident.
func appendCCA(dst []byte, c *ccr, ident []byte, a *answer) []byte {
	start := len(dst)
	flags := c.hdr.Flags & wire.FlagProxiable
	if isProtocolError(a.result) {
		flags |= wire.FlagError
	}
	dst = wire.AppendHeader(dst, flags, wire.CmdCreditControl, wire.AppCreditControl, c.hdr.HopByHop, c.hdr.EndToEnd)
	if c.sessionIDRaw != nil {
		dst = wire.AppendRaw(dst, c.sessionIDRaw)
	}
	dst = wire.AppendUint32(dst, wire.CodeResultCode, wire.AVPMandatory, 0, a.result)
	dst = append(dst, ident...)
	if c.hasReqType {
		dst = wire.AppendUint32(dst, wire.CodeCCRequestType, wire.AVPMandatory, 0, c.reqType)
	}
	if c.hasReqNumber {
		dst = wire.AppendUint32(dst, wire.CodeCCRequestNumber, wire.AVPMandatory, 0, c.reqNumber)
	}
	if a.failed != nil {
		var g int
		dst, g = wire.BeginGroup(dst, wire.CodeFailedAVP, wire.AVPMandatory, 0)
		dst = wire.AppendRaw(dst, a.failed)
		dst = wire.EndGroup(dst, g)
	}
	if r := a.resp; r != nil {
		dst = appendGrants(dst, r)
		switch a.op {
		case chf.OpBalance:
			if r.Result == chf.ResultSuccess {
				cbr := wire.NoCredit
				if r.Balance-r.Reserved > 0 {
					cbr = wire.EnoughCredit
				}
				dst = wire.AppendUint32(dst, wire.CodeCheckBalanceResult, wire.AVPMandatory, 0, cbr)
			}
		default:
			if r.Result == chf.ResultSuccess || r.Charged != 0 {
				dst = appendCost(dst, r.Charged, r.Currency, a.defaultCur)
			}
		}
	}
	wire.SetLength(dst[start:])
	return dst
}

// appendGrants appends one MSCC per grant line.
func appendGrants(dst []byte, r *chf.ChargeResponse) []byte {
	for i := range r.Lines {
		l := &r.Lines[i]
		var m int
		dst, m = wire.BeginGroup(dst, wire.CodeMSCC, wire.AVPMandatory, 0)
		if !l.Granted.IsZero() {
			var g int
			dst, g = wire.BeginGroup(dst, wire.CodeGrantedServiceUnit, wire.AVPMandatory, 0)
			dst = wire.AppendUnits(dst, &l.Granted)
			dst = wire.EndGroup(dst, g)
		}
		dst = wire.AppendUint32(dst, wire.CodeRatingGroup, wire.AVPMandatory, 0, l.RatingGroup)
		if l.ValidityTime != 0 {
			dst = wire.AppendUint32(dst, wire.CodeValidityTime, wire.AVPMandatory, 0, l.ValidityTime)
		}
		dst = wire.AppendUint32(dst, wire.CodeResultCode, wire.AVPMandatory, 0, resultCode(l.Result))
		if l.FinalUnit {
			dst = appendFUI(dst, l)
		}
		if l.Threshold != 0 {
			// Gy arms the threshold by sending it (Reporting-Reason
			// THRESHOLD); exhaustion and validity are reported by the
			// client without being armed.
			code := wire.CodeUnitQuotaThreshold
			switch {
			case l.Granted.TotalVolume != 0:
				code = wire.CodeVolumeQuotaThreshold
			case l.Granted.Time != 0:
				code = wire.CodeTimeQuotaThreshold
			}
			dst = wire.AppendUint32(dst, code, wire.AVPMandatory, wire.Vendor3GPP, uint32(min(l.Threshold, 1<<32-1)))
		}
		if l.QuotaHoldingTime != 0 {
			dst = wire.AppendUint32(dst, wire.CodeQuotaHoldingTime, wire.AVPMandatory, wire.Vendor3GPP, l.QuotaHoldingTime)
		}
		dst = wire.EndGroup(dst, m)
	}
	return dst
}

// appendFUI appends a Final-Unit-Indication: TERMINATE, REDIRECT with a
// Redirect-Server, or RESTRICT_ACCESS with a Filter-Id.
func appendFUI(dst []byte, l *chf.GrantLine) []byte {
	var f int
	dst, f = wire.BeginGroup(dst, wire.CodeFinalUnitIndication, wire.AVPMandatory, 0)
	switch l.FinalAction {
	case chf.FinalRedirect:
		dst = wire.AppendUint32(dst, wire.CodeFinalUnitAction, wire.AVPMandatory, 0, wire.FinalUnitRedirect)
		var r int
		dst, r = wire.BeginGroup(dst, wire.CodeRedirectServer, wire.AVPMandatory, 0)
		dst = wire.AppendUint32(dst, wire.CodeRedirectAddressType, wire.AVPMandatory, 0, uint32(l.RedirectType))
		dst = wire.AppendString(dst, wire.CodeRedirectServerAddress, wire.AVPMandatory, 0, l.Redirect)
		dst = wire.EndGroup(dst, r)
	case chf.FinalRestrictAccess:
		dst = wire.AppendUint32(dst, wire.CodeFinalUnitAction, wire.AVPMandatory, 0, wire.FinalUnitRestrictAccess)
		dst = wire.AppendString(dst, wire.CodeFilterID, wire.AVPMandatory, 0, l.FilterID)
	default:
		dst = wire.AppendUint32(dst, wire.CodeFinalUnitAction, wire.AVPMandatory, 0, wire.FinalUnitTerminate)
	}
	return wire.EndGroup(dst, f)
}

// appendCost appends Cost-Information with the amount charged: Unit-Value
// {Value-Digits = amount in minor units, Exponent = -minor digits of the
// currency} and Currency-Code (ISO 4217 numeric). A currency missing from
// the table is reported with exponent -2 and Cost-Unit naming it.
func appendCost(dst []byte, charged int64, cur, def string) []byte {
	if cur == "" {
		cur = def
	}
	c, known := currencies[cur]
	if !known {
		c = currency{exponent: 2}
	}
	var g, u int
	dst, g = wire.BeginGroup(dst, wire.CodeCostInformation, wire.AVPMandatory, 0)
	dst, u = wire.BeginGroup(dst, wire.CodeUnitValue, wire.AVPMandatory, 0)
	dst = wire.AppendUint64(dst, wire.CodeValueDigits, wire.AVPMandatory, 0, uint64(charged))
	dst = wire.AppendUint32(dst, wire.CodeExponent, wire.AVPMandatory, 0, uint32(-c.exponent))
	dst = wire.EndGroup(dst, u)
	dst = wire.AppendUint32(dst, wire.CodeCurrencyCode, wire.AVPMandatory, 0, c.code)
	if !known {
		dst = wire.AppendString(dst, wire.CodeCostUnit, wire.AVPMandatory, 0, cur)
	}
	return wire.EndGroup(dst, g)
}
