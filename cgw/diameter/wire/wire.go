// Package wire is an allocation-free Diameter (RFC 6733) message and AVP
// codec over byte slices: header parsing, an AVP iterator that never
// copies, and Append* encoders that build messages into a caller-owned
// buffer. It knows no dictionary; callers switch on AVP codes. The CGW's
// Gy server (cgw/diameter) and the load generator's Gy client
// (loadgen/gy) share it so neither decodes CCR/CCA by reflection.
//
// All functions are safe for concurrent use; slices returned by the
// iterator alias the message buffer and are valid as long as it is.
package wire

import (
	"github.com/chf-testbed/testbed/chf"

	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderLen is the length of a Diameter message header.
const HeaderLen = 20

// Command flags.
const (
	FlagRequest       uint8 = 0x80
	FlagProxiable     uint8 = 0x40
	FlagError         uint8 = 0x20
	FlagRetransmitted uint8 = 0x10
)

// AVP flags.
const (
	AVPVendor    uint8 = 0x80
	AVPMandatory uint8 = 0x40
)

// Command codes and application ids used by Gy.
const (
	CmdCapabilitiesExchange uint32 = 257
	CmdCreditControl        uint32 = 272
	CmdReAuth               uint32 = 258 // RAR/RAA (RFC 6733)
	CmdAbortSession         uint32 = 274 // ASR/ASA (RFC 6733)
	CmdDeviceWatchdog       uint32 = 280
	CmdDisconnectPeer       uint32 = 282

	AppCommon        uint32 = 0
	AppCreditControl uint32 = 4

	Vendor3GPP uint32 = 10415
)

// AVP codes (RFC 6733, RFC 4006, TS 32.299).
const (
	CodeAuthApplicationID      uint32 = 258
	CodeSessionID              uint32 = 263
	CodeOriginHost             uint32 = 264
	CodeResultCode             uint32 = 268
	CodeDisconnectCause        uint32 = 273
	CodeFailedAVP              uint32 = 279
	CodeErrorMessage           uint32 = 281
	CodeDestinationRealm       uint32 = 283
	CodeDestinationHost        uint32 = 293
	CodeTerminationCause       uint32 = 295
	CodeOriginRealm            uint32 = 296
	CodeOriginStateID          uint32 = 278
	CodeCCInputOctets          uint32 = 412
	CodeCCMoney                uint32 = 413
	CodeCCOutputOctets         uint32 = 414
	CodeCCRequestNumber        uint32 = 415
	CodeCCRequestType          uint32 = 416
	CodeCCServiceSpecificUnits uint32 = 417
	CodeCCTime                 uint32 = 420
	CodeCCTotalOctets          uint32 = 421
	CodeCheckBalanceResult     uint32 = 422
	CodeCostInformation        uint32 = 423
	CodeCostUnit               uint32 = 424
	CodeCurrencyCode           uint32 = 425
	CodeExponent               uint32 = 429
	CodeFinalUnitIndication    uint32 = 430
	CodeGrantedServiceUnit     uint32 = 431
	CodeRatingGroup            uint32 = 432
	CodeRequestedAction        uint32 = 436
	CodeRequestedServiceUnit   uint32 = 437
	CodeServiceIdentifier      uint32 = 439
	CodeSubscriptionID         uint32 = 443
	CodeSubscriptionIDData     uint32 = 444
	CodeUnitValue              uint32 = 445
	CodeUsedServiceUnit        uint32 = 446
	CodeValueDigits            uint32 = 447
	CodeValidityTime           uint32 = 448
	CodeFinalUnitAction        uint32 = 449
	CodeSubscriptionIDType     uint32 = 450
	CodeMultipleServicesInd    uint32 = 455
	CodeMSCC                   uint32 = 456
	CodeServiceContextID       uint32 = 461
	CodeQuotaHoldingTime       uint32 = 871 // vendor 3GPP
	CodeFilterID               uint32 = 11
	CodeReAuthRequestType      uint32 = 285
	CodeRedirectAddressType    uint32 = 433
	CodeRedirectServer         uint32 = 434
	CodeRedirectServerAddress  uint32 = 435
	CodeTimeQuotaThreshold     uint32 = 868  // vendor 3GPP
	CodeVolumeQuotaThreshold   uint32 = 869  // vendor 3GPP
	CodeReportingReason        uint32 = 872  // vendor 3GPP
	CodeUnitQuotaThreshold     uint32 = 1226 // vendor 3GPP
)

// Reporting-Reason values (TS 32.299).
const (
	ReasonThreshold      uint32 = 0
	ReasonQHT            uint32 = 1
	ReasonFinal          uint32 = 2
	ReasonQuotaExhausted uint32 = 3
	ReasonValidityTime   uint32 = 4
	ReasonForcedReauth   uint32 = 7
)

// Result codes (RFC 6733, RFC 4006).
const (
	ResultSuccess              uint32 = 2001
	ResultCommandUnsupported   uint32 = 3001
	ResultUnableToDeliver      uint32 = 3002
	ResultTooBusy              uint32 = 3004
	ResultApplicationUnsupport uint32 = 3007
	ResultInvalidHdrBits       uint32 = 3008
	ResultUnknownPeer          uint32 = 3010
	ResultEndUserServiceDenied uint32 = 4010
	ResultCreditLimitReached   uint32 = 4012
	ResultUnknownSessionID     uint32 = 5002
	ResultInvalidAVPValue      uint32 = 5004
	ResultMissingAVP           uint32 = 5005
	ResultNoCommonApplication  uint32 = 5010
	ResultUnableToComply       uint32 = 5012
	ResultInvalidAVPLength     uint32 = 5014
	ResultUserUnknown          uint32 = 5030
	ResultRatingFailed         uint32 = 5031
)

// CC-Request-Type values.
const (
	RequestInitial     uint32 = 1
	RequestUpdate      uint32 = 2
	RequestTermination uint32 = 3
	RequestEvent       uint32 = 4
)

// Requested-Action values.
const (
	ActionDirectDebiting uint32 = 0
	ActionRefundAccount  uint32 = 1
	ActionCheckBalance   uint32 = 2
	ActionPriceEnquiry   uint32 = 3
)

// Subscription-Id-Type values.
const (
	SubscriptionE164 uint32 = 0
	SubscriptionIMSI uint32 = 1
)

// Check-Balance-Result values.
const (
	EnoughCredit uint32 = 0
	NoCredit     uint32 = 1
)

// Final-Unit-Action values.
const (
	FinalUnitTerminate      uint32 = 0
	FinalUnitRedirect       uint32 = 1
	FinalUnitRestrictAccess uint32 = 2
)

// Errors of the codec.
var (
	ErrShortHeader   = errors.New("wire: message shorter than a Diameter header")
	ErrVersion       = errors.New("wire: Diameter version is not 1")
	ErrMessageLength = errors.New("wire: invalid Diameter message length")
	ErrTooLarge      = errors.New("wire: Diameter message larger than the limit")
	ErrAVPLength     = errors.New("wire: invalid AVP length")
)

// Header is a decoded Diameter message header.
type Header struct {
	Length   uint32
	Flags    uint8
	Code     uint32
	AppID    uint32
	HopByHop uint32
	EndToEnd uint32
}

// IsRequest reports whether the R flag is set.
func (h *Header) IsRequest() bool { return h.Flags&FlagRequest != 0 }

// ParseHeader decodes the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShortHeader
	}
	if b[0] != 1 {
		return Header{}, ErrVersion
	}
	h := Header{
		Length:   uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]),
		Flags:    b[4],
		Code:     uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]),
		AppID:    binary.BigEndian.Uint32(b[8:]),
		HopByHop: binary.BigEndian.Uint32(b[12:]),
		EndToEnd: binary.BigEndian.Uint32(b[16:]),
	}
	if h.Length < HeaderLen || h.Length%4 != 0 {
		return h, ErrMessageLength
	}
	return h, nil
}

// ReadMessage reads one whole message from r into buf (grown when too
// small) and returns it. Messages longer than limit bytes, with another
// version or with an invalid length are refused: the stream cannot be
// resynchronised after them, so the caller must close the connection.
func ReadMessage(r *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf[:0], err
	}
	h, err := ParseHeader(hdr[:])
	if err != nil {
		return buf[:0], err
	}
	if int(h.Length) > limit {
		return buf[:0], fmt.Errorf("cannot read message of %d bytes: %w", h.Length, ErrTooLarge)
	}
	if cap(buf) < int(h.Length) {
		buf = make([]byte, h.Length, max(int(h.Length), 1024))
	}
	buf = buf[:h.Length]
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[HeaderLen:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	return buf, nil
}

// AppendHeader appends a header with a zero length; call SetLength when
// the message is complete.
func AppendHeader(dst []byte, flags uint8, code, app, hopByHop, endToEnd uint32) []byte {
	dst = append(dst, 1, 0, 0, 0, flags, byte(code>>16), byte(code>>8), byte(code))
	dst = binary.BigEndian.AppendUint32(dst, app)
	dst = binary.BigEndian.AppendUint32(dst, hopByHop)
	return binary.BigEndian.AppendUint32(dst, endToEnd)
}

// SetLength writes len(msg) into the header of msg.
func SetLength(msg []byte) {
	n := len(msg)
	msg[1], msg[2], msg[3] = byte(n>>16), byte(n>>8), byte(n)
}

// AVP is one decoded AVP. Data and Raw alias the message buffer.
type AVP struct {
	Code   uint32
	Flags  uint8
	Vendor uint32
	Data   []byte // payload without padding
	Raw    []byte // the whole AVP: header, payload, padding
}

// Iter walks the AVPs of a message body or of a grouped AVP's payload.
// On malformed input Next returns false and Err reports ErrAVPLength; Bad
// then holds the offending bytes (at least the AVP header when present).
type Iter struct {
	b   []byte
	err error
	bad []byte
}

// NewIter returns an iterator over the AVPs in b.
func NewIter(b []byte) Iter { return Iter{b: b} }

// MessageIter returns an iterator over the AVPs of a whole message.
func MessageIter(msg []byte) Iter {
	if len(msg) < HeaderLen {
		return Iter{}
	}
	return Iter{b: msg[HeaderLen:]}
}

// Next decodes the next AVP into a; it returns false at the end or on error.
func (it *Iter) Next(a *AVP) bool {
	b := it.b
	if len(b) == 0 {
		return false
	}
	if len(b) < 8 {
		it.fail(b)
		return false
	}
	n := int(b[5])<<16 | int(b[6])<<8 | int(b[7])
	hl := 8
	if b[4]&AVPVendor != 0 {
		hl = 12
	}
	if n < hl || n > len(b) {
		it.fail(b)
		return false
	}
	a.Code = binary.BigEndian.Uint32(b)
	a.Flags = b[4]
	a.Vendor = 0
	if hl == 12 {
		a.Vendor = binary.BigEndian.Uint32(b[8:])
	}
	a.Data = b[hl:n]
	p := (n + 3) &^ 3
	if p > len(b) {
		p = len(b) // last AVP without padding: tolerated
	}
	a.Raw = b[:p]
	it.b = b[p:]
	return true
}

func (it *Iter) fail(b []byte) {
	it.err = ErrAVPLength
	if len(b) > 12 {
		b = b[:12]
	}
	it.bad = b
	it.b = nil
}

// Err reports why Next stopped early, or nil at the end.
func (it *Iter) Err() error { return it.err }

// Bad is the start of the malformed AVP after Err returned an error.
func (it *Iter) Bad() []byte { return it.bad }

// Uint32 decodes an Unsigned32/Enumerated/Integer32 payload.
func Uint32(d []byte) (uint32, bool) {
	if len(d) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(d), true
}

// Uint64 decodes an Unsigned64/Integer64 payload.
func Uint64(d []byte) (uint64, bool) {
	if len(d) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(d), true
}

func appendAVPHeader(dst []byte, code uint32, flags uint8, vendor uint32, dataLen int) []byte {
	if vendor != 0 {
		flags |= AVPVendor
		n := 12 + dataLen
		dst = binary.BigEndian.AppendUint32(dst, code)
		dst = append(dst, flags, byte(n>>16), byte(n>>8), byte(n))
		return binary.BigEndian.AppendUint32(dst, vendor)
	}
	flags &^= AVPVendor
	n := 8 + dataLen
	dst = binary.BigEndian.AppendUint32(dst, code)
	return append(dst, flags, byte(n>>16), byte(n>>8), byte(n))
}

// AppendUint32 appends an Unsigned32/Enumerated/Integer32 AVP.
func AppendUint32(dst []byte, code uint32, flags uint8, vendor uint32, v uint32) []byte {
	dst = appendAVPHeader(dst, code, flags, vendor, 4)
	return binary.BigEndian.AppendUint32(dst, v)
}

// AppendUint64 appends an Unsigned64/Integer64 AVP.
func AppendUint64(dst []byte, code uint32, flags uint8, vendor uint32, v uint64) []byte {
	dst = appendAVPHeader(dst, code, flags, vendor, 8)
	return binary.BigEndian.AppendUint64(dst, v)
}

// AppendBytes appends an OctetString-like AVP (UTF8String,
// DiameterIdentity) with padding.
func AppendBytes(dst []byte, code uint32, flags uint8, vendor uint32, v []byte) []byte {
	dst = appendAVPHeader(dst, code, flags, vendor, len(v))
	dst = append(dst, v...)
	return pad(dst, len(v))
}

// AppendString is AppendBytes for a string.
func AppendString(dst []byte, code uint32, flags uint8, vendor uint32, v string) []byte {
	dst = appendAVPHeader(dst, code, flags, vendor, len(v))
	dst = append(dst, v...)
	return pad(dst, len(v))
}

func pad(dst []byte, n int) []byte {
	switch n & 3 {
	case 1:
		return append(dst, 0, 0, 0)
	case 2:
		return append(dst, 0, 0)
	case 3:
		return append(dst, 0)
	}
	return dst
}

// BeginGroup appends the header of a grouped AVP and returns the offset to
// pass to EndGroup once its members are appended.
func BeginGroup(dst []byte, code uint32, flags uint8, vendor uint32) ([]byte, int) {
	start := len(dst)
	return appendAVPHeader(dst, code, flags, vendor, 0), start
}

// EndGroup patches the length of the grouped AVP begun at start.
func EndGroup(dst []byte, start int) []byte {
	n := len(dst) - start
	dst[start+5], dst[start+6], dst[start+7] = byte(n>>16), byte(n>>8), byte(n)
	return dst
}

// AppendRaw appends an AVP's raw bytes (AVP.Raw), padding it to a multiple
// of 4 when it arrived unpadded at the end of its container.
func AppendRaw(dst, raw []byte) []byte {
	dst = append(dst, raw...)
	return pad(dst, len(raw))
}

// AppendUnits appends the CC-Time, CC-Total/Input/Output-Octets and
// CC-Service-Specific-Units AVPs of u that are non-zero (the content of a
// Requested-, Granted- or Used-Service-Unit group).
func AppendUnits(dst []byte, u *chf.Units) []byte {
	if u.Time != 0 {
		dst = AppendUint32(dst, CodeCCTime, AVPMandatory, 0, u.Time)
	}
	if u.TotalVolume != 0 {
		dst = AppendUint64(dst, CodeCCTotalOctets, AVPMandatory, 0, u.TotalVolume)
	}
	if u.UplinkVolume != 0 {
		dst = AppendUint64(dst, CodeCCInputOctets, AVPMandatory, 0, u.UplinkVolume)
	}
	if u.DownlinkVolume != 0 {
		dst = AppendUint64(dst, CodeCCOutputOctets, AVPMandatory, 0, u.DownlinkVolume)
	}
	if u.ServiceSpecific != 0 {
		dst = AppendUint64(dst, CodeCCServiceSpecificUnits, AVPMandatory, 0, u.ServiceSpecific)
	}
	return dst
}
