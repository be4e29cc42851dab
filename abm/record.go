package abm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/chf-testbed/testbed/abm/record"
	"github.com/chf-testbed/testbed/chf"
)

// ErrCorruptRecord is returned when an account's session blob cannot be
// decoded.
var ErrCorruptRecord = errors.New("abm: corrupt account session blob")

// blobVersion is the first byte of every session blob written
// (record.BlobVersion); older blobs are read (version 1: no overage,
// operations, digests or recent identities; before 4: no charge of the
// last answers, replayed as 0; before 5: no account flags, so not barred;
// before 6: a second, looser key per recent identity, skipped).
const blobVersion = record.BlobVersion

// Bin names of an account record: package abm/record's, which
// provisioning shares without linking the ABM.
const (
	BinBalance  = record.BinBalance
	BinCurrency = record.BinCurrency
	BinDebited  = record.BinDebited
	BinSessions = record.BinSessions
	BinEpoch    = record.BinEpoch
	BinDue      = record.BinDue
)

// DueNever is account.sweepDue of an account on which nothing will
// expire (record.DueNever): no reservation, session, answer kept for
// retries or bucket with a validity. Its record has no BinDue.
const DueNever = record.DueNever

// reservation is balance held for one rating group of one session.
type reservation struct {
	rg      uint32
	amount  int64  // minor units held
	units   uint64 // base units granted
	expires int64  // unix seconds
	// bunits of the granted units are held from the account's buckets of
	// service svc (the rest is paid by amount).
	bunits uint64
	svc    chf.Service
}

// bucket is an allowance of one service's base units, consumed before the
// monetary balance until it expires.
type bucket struct {
	svc     chf.Service
	units   uint64 // left
	expires int64  // unix seconds, 0 = never
}

// session is one charging session of an account, open or closed. A closed
// session is kept for a while so that a repeated release (or event) is
// answered from the record instead of charging again.
type session struct {
	id      []byte
	lastSeq uint32
	closed  bool
	expires int64 // unix seconds: removed at or after this time
	res     []reservation
	// The last answer, replayed for a request repeating lastSeq with the
	// same operation and content digest (op 0: a version 1 record, not
	// checked).
	op     chf.Op
	digest uint64
	result chf.Result
	lines  []chf.GrantLine
	// charged is what the last answer debited (minor units), reported
	// again by its replays.
	charged int64
	// notify is the notifyUri the create named (empty: none).
	notify []byte
	// aborted: the operator aborted the session (OpAbortSessions); it
	// takes no update, only its release.
	aborted bool
	// enc is the session's encoding in the current blob version when
	// encOK: appendSessions copies it instead of encoding the session
	// again, so an event on an account with many sessions encodes only
	// the ones it changed. Every change to the session clears encOK
	// (touch); decodeSessions fills enc from the blob it reads.
	enc   []byte
	encOK bool
}

// touch marks s changed: its cached encoding is no longer valid.
func (s *session) touch() { s.encOK = false }

// recent is the remembered answer to a create or event, found again by
// the request's exact identity (chf.ApplyRequest Key, operation and
// Digest) until it expires.
type recent struct {
	key, digest uint64
	expires     int64 // unix seconds
	op          chf.Op
	session     []byte // the session a create opened
	result      chf.Result
	lines       []chf.GrantLine
	charged     int64 // what the answer debited, reported again by its replays
}

// account is an account record decoded for one read-modify-write. Its
// slices are reused across decodes (pool accounts, not sessions).
type account struct {
	balance  int64
	debited  int64
	reserved int64 // sum of the live reservations' amounts
	// overage is usage rated beyond what the balance could pay, kept in
	// the session blob; overNew is what this decode's events added (for
	// the metric, not stored).
	overage  int64
	overNew  int64
	currency string
	sessions []session
	recent   []recent
	// epoch is the tariff epoch of the open sessions' grants (BinEpoch),
	// epochRead what the record held (the bin is written when they
	// differ).
	epoch, epochRead uint32
	// creditLimit > 0 makes the account postpaid: the balance may go down
	// to -creditLimit. offline is offline usage rated (never debited),
	// credited the top-ups; buckets the allowances. All in the blob.
	creditLimit int64
	offline     int64
	credited    int64
	buckets     []bucket
	// barred: the operator aborted the account (OpAbortSessions): it
	// takes no create and no event until OpUnbar. In the blob.
	barred bool
}

func (a *account) reset() {
	a.balance, a.debited, a.reserved, a.overage, a.overNew, a.currency = 0, 0, 0, 0, 0, ""
	a.creditLimit, a.offline, a.credited = 0, 0, 0
	a.barred = false
	a.sessions = a.sessions[:0]
	a.recent = a.recent[:0]
	a.buckets = a.buckets[:0]
}

// newRecent appends an empty recent entry, reusing a previous slot's
// capacity.
func (a *account) newRecent() *recent {
	if len(a.recent) < cap(a.recent) {
		a.recent = a.recent[:len(a.recent)+1]
	} else {
		a.recent = append(a.recent, recent{})
	}
	r := &a.recent[len(a.recent)-1]
	r.session, r.lines, r.charged = r.session[:0], r.lines[:0], 0
	return r
}

// newSession appends an empty session with the given id, reusing the
// capacity of a previously decoded session in that slot.
func (a *account) newSession(id string) *session {
	if len(a.sessions) < cap(a.sessions) {
		a.sessions = a.sessions[:len(a.sessions)+1]
	} else {
		a.sessions = append(a.sessions, session{})
	}
	s := &a.sessions[len(a.sessions)-1]
	s.id = append(s.id[:0], id...)
	s.lastSeq, s.closed, s.expires, s.result, s.op, s.digest, s.charged = 0, false, 0, chf.ResultSuccess, 0, 0, 0
	s.aborted, s.encOK = false, false
	s.res = s.res[:0]
	s.lines = s.lines[:0]
	s.notify = s.notify[:0]
	return s
}

// removeSession drops session i (order is not kept). The removed slot keeps
// its slices' capacity for reuse.
func (a *account) removeSession(i int) {
	last := len(a.sessions) - 1
	a.sessions[i], a.sessions[last] = a.sessions[last], a.sessions[i]
	a.sessions = a.sessions[:last]
}

// Session blob layout (all integers varints as encoding/binary writes them):
//
//	version byte (6)
//	varint overage (minor units)
//	(version 3) varint credit limit, varint offline total, varint credited,
//	  uvarint bucket count, then per bucket: byte service, uvarint units
//	  left, varint expiry (unix seconds, 0 = never)
//	(version 5) byte account flags (bit 0: barred by the operator)
//	uvarint session count, then per session:
//	  uvarint id length, id bytes
//	  uvarint last answered sequence number
//	  byte flags (bit 0: closed, bit 1: aborted by the operator)
//	  varint expiry (unix seconds)
//	  uvarint reservation count, then per reservation:
//	    uvarint rating group, uvarint amount, uvarint units, varint expiry,
//	    (version 3) uvarint bucket units held, byte service
//	  ... the last answer, operation and digest (below), then
//	  (version 3) uvarint notifyUri length, notifyUri bytes
//	  (version 4) varint what the last answer charged (minor units)
//	  byte result of the last answer
//	  uvarint answer line count, then per line:
//	    uvarint rating group, byte result,
//	    byte flags (bit 0 final unit; bits 1-5: time, total, uplink,
//	      downlink, service-specific units present), the present units as
//	      uvarints, uvarint validity time, uvarint quota holding time
//	(version 2) uvarint recent identity count, then per identity:
//	  uvarint key, (versions 2 to 5) uvarint looser key (ignored),
//	  uvarint digest, varint expiry,
//	  byte operation, uvarint session length, session bytes, byte result,
//	  the answer lines (as above), (version 4) varint what it charged
//
// An empty blob is an account without sessions.

const (
	lineFinal = 1 << iota
	lineTime
	lineTotal
	lineUp
	lineDown
	lineSpecific
)

// appendSessions encodes a's sessions and recent identities onto dst.
func (a *account) appendSessions(dst []byte) []byte {
	dst = append(dst, blobVersion)
	dst = binary.AppendVarint(dst, a.overage)
	dst = binary.AppendVarint(dst, a.creditLimit)
	dst = binary.AppendVarint(dst, a.offline)
	dst = binary.AppendVarint(dst, a.credited)
	dst = binary.AppendUvarint(dst, uint64(len(a.buckets)))
	for _, b := range a.buckets {
		dst = append(dst, byte(b.svc))
		dst = binary.AppendUvarint(dst, b.units)
		dst = binary.AppendVarint(dst, b.expires)
	}
	var af byte
	if a.barred {
		af |= 1
	}
	dst = append(dst, af)
	dst = binary.AppendUvarint(dst, uint64(len(a.sessions)))
	for i := range a.sessions {
		s := &a.sessions[i]
		if s.encOK {
			dst = append(dst, s.enc...)
			continue
		}
		start := len(dst)
		dst = appendSession(dst, s)
		s.enc, s.encOK = append(s.enc[:0], dst[start:]...), true
	}
	dst = binary.AppendUvarint(dst, uint64(len(a.recent)))
	for i := range a.recent {
		r := &a.recent[i]
		dst = binary.AppendUvarint(dst, r.key)
		dst = binary.AppendUvarint(dst, r.digest)
		dst = binary.AppendVarint(dst, r.expires)
		dst = append(dst, byte(r.op))
		dst = binary.AppendUvarint(dst, uint64(len(r.session)))
		dst = append(dst, r.session...)
		dst = append(dst, byte(r.result))
		dst = appendLines(dst, r.lines)
		dst = binary.AppendVarint(dst, r.charged)
	}
	return dst
}

// appendSession encodes one session of a version 5 or 6 blob (alike).
func appendSession(dst []byte, s *session) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.id)))
	dst = append(dst, s.id...)
	dst = binary.AppendUvarint(dst, uint64(s.lastSeq))
	var flags byte
	if s.closed {
		flags |= 1
	}
	if s.aborted {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, s.expires)
	dst = binary.AppendUvarint(dst, uint64(len(s.res)))
	for _, r := range s.res {
		dst = binary.AppendUvarint(dst, uint64(r.rg))
		dst = binary.AppendUvarint(dst, uint64(r.amount))
		dst = binary.AppendUvarint(dst, r.units)
		dst = binary.AppendVarint(dst, r.expires)
		dst = binary.AppendUvarint(dst, r.bunits)
		dst = append(dst, byte(r.svc))
	}
	dst = append(dst, byte(s.result))
	dst = appendLines(dst, s.lines)
	dst = append(dst, byte(s.op))
	dst = binary.AppendUvarint(dst, s.digest)
	dst = binary.AppendUvarint(dst, uint64(len(s.notify)))
	dst = append(dst, s.notify...)
	dst = binary.AppendVarint(dst, s.charged)
	return dst
}

// appendLines encodes an answer's grant lines.
func appendLines(dst []byte, lines []chf.GrantLine) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(lines)))
	for j := range lines {
		l := &lines[j]
		dst = binary.AppendUvarint(dst, uint64(l.RatingGroup))
		dst = append(dst, byte(l.Result))
		var f byte
		if l.FinalUnit {
			f |= lineFinal
		}
		g := &l.Granted
		if g.Time != 0 {
			f |= lineTime
		}
		if g.TotalVolume != 0 {
			f |= lineTotal
		}
		if g.UplinkVolume != 0 {
			f |= lineUp
		}
		if g.DownlinkVolume != 0 {
			f |= lineDown
		}
		if g.ServiceSpecific != 0 {
			f |= lineSpecific
		}
		dst = append(dst, f)
		if g.Time != 0 {
			dst = binary.AppendUvarint(dst, uint64(g.Time))
		}
		if g.TotalVolume != 0 {
			dst = binary.AppendUvarint(dst, g.TotalVolume)
		}
		if g.UplinkVolume != 0 {
			dst = binary.AppendUvarint(dst, g.UplinkVolume)
		}
		if g.DownlinkVolume != 0 {
			dst = binary.AppendUvarint(dst, g.DownlinkVolume)
		}
		if g.ServiceSpecific != 0 {
			dst = binary.AppendUvarint(dst, g.ServiceSpecific)
		}
		dst = binary.AppendUvarint(dst, uint64(l.ValidityTime))
		dst = binary.AppendUvarint(dst, uint64(l.QuotaHoldingTime))
	}
	return dst
}

// blobReader decodes varints from a blob, remembering the first error.
type blobReader struct {
	b   []byte
	err error
}

// fail records that the blob is corrupt; nothing more is read.
func (r *blobReader) fail() {
	r.err, r.b = ErrCorruptRecord, nil
}

func (r *blobReader) uvarint() uint64 {
	// Most values of a blob fit one byte: that case inlines. (After an
	// error r.b is empty, so it never applies.)
	if b := r.b; len(b) > 0 && b[0] < 0x80 {
		r.b = b[1:]
		return uint64(b[0])
	}
	return r.uvarintLong()
}

func (r *blobReader) uvarintLong() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *blobReader) varint() int64 {
	if b := r.b; len(b) > 0 && b[0] < 0x80 {
		r.b = b[1:]
		return int64(b[0]>>1) ^ -int64(b[0]&1)
	}
	return r.varintLong()
}

func (r *blobReader) varintLong() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *blobReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *blobReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// count reads a collection length and rejects lengths the remaining bytes
// cannot hold (each element takes at least min bytes), so corrupt input
// cannot make the decoder allocate without bound.
func (r *blobReader) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

// decodeSessions replaces a's overage, sessions and recent identities with
// those in blob and recomputes a.reserved. Slices of a are reused; blob is
// not retained.
func (a *account) decodeSessions(blob []byte) error {
	a.sessions = a.sessions[:0]
	a.recent = a.recent[:0]
	a.buckets = a.buckets[:0]
	a.reserved, a.overage, a.overNew = 0, 0, 0
	a.creditLimit, a.offline, a.credited = 0, 0, 0
	a.barred = false
	if len(blob) == 0 {
		return nil
	}
	r := blobReader{b: blob}
	v := r.byte()
	if v < 1 || v > blobVersion {
		return fmt.Errorf("%w: version %d", ErrCorruptRecord, v)
	}
	if v >= 2 {
		a.overage = r.varint()
	}
	if v >= 3 {
		a.creditLimit, a.offline, a.credited = r.varint(), r.varint(), r.varint()
		nb := r.count(3)
		for i := 0; i < nb && r.err == nil; i++ {
			a.buckets = append(a.buckets, bucket{svc: chf.Service(r.byte()), units: r.uvarint(), expires: r.varint()})
		}
		if a.creditLimit < 0 {
			r.fail()
		}
	}
	if v >= 5 {
		a.barred = r.byte()&1 != 0
	}
	n := r.count(6)
	for i := 0; i < n && r.err == nil; i++ {
		rest := r.b
		s := a.newSession("")
		s.id = append(s.id[:0], r.bytes(r.uvarint())...)
		s.lastSeq = uint32(r.uvarint())
		flags := r.byte()
		s.closed, s.aborted = flags&1 != 0, flags&2 != 0
		s.expires = r.varint()
		nr := r.count(4)
		for j := 0; j < nr && r.err == nil; j++ {
			res := reservation{
				rg:     uint32(r.uvarint()),
				amount: int64(r.uvarint()),
				units:  r.uvarint(),
			}
			res.expires = r.varint()
			if v >= 3 {
				res.bunits = r.uvarint()
				res.svc = chf.Service(r.byte())
			}
			if res.amount < 0 {
				r.fail()
			}
			s.res = append(s.res, res)
			a.reserved += res.amount
		}
		s.result = chf.Result(r.byte())
		s.lines = r.lines(s.lines)
		if v >= 2 {
			s.op = chf.Op(r.byte())
			s.digest = r.uvarint()
		}
		if v >= 3 {
			s.notify = append(s.notify[:0], r.bytes(r.uvarint())...)
		}
		if v >= 4 {
			s.charged = r.varint()
		}
		if v >= 5 && r.err == nil {
			// The bytes just read are the session's encoding (the same
			// in versions 5 and 6).
			s.enc, s.encOK = append(s.enc[:0], rest[:len(rest)-len(r.b)]...), true
		}
	}
	if v >= 2 {
		n = r.count(7)
		for i := 0; i < n && r.err == nil; i++ {
			e := a.newRecent()
			e.key = r.uvarint()
			if v < 6 {
				r.uvarint() // the looser key, no longer matched
			}
			e.digest = r.uvarint()
			e.expires = r.varint()
			e.op = chf.Op(r.byte())
			e.session = append(e.session, r.bytes(r.uvarint())...)
			e.result = chf.Result(r.byte())
			e.lines = r.lines(e.lines)
			if v >= 4 {
				e.charged = r.varint()
			}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	return r.err
}

// lines decodes an answer's grant lines onto dst[:0].
func (r *blobReader) lines(dst []chf.GrantLine) []chf.GrantLine {
	dst = dst[:0]
	nl := r.count(5)
	for j := 0; j < nl && r.err == nil; j++ {
		l := chf.GrantLine{RatingGroup: uint32(r.uvarint()), Result: chf.Result(r.byte())}
		f := r.byte()
		l.FinalUnit = f&lineFinal != 0
		if f&lineTime != 0 {
			l.Granted.Time = uint32(r.uvarint())
		}
		if f&lineTotal != 0 {
			l.Granted.TotalVolume = r.uvarint()
		}
		if f&lineUp != 0 {
			l.Granted.UplinkVolume = r.uvarint()
		}
		if f&lineDown != 0 {
			l.Granted.DownlinkVolume = r.uvarint()
		}
		if f&lineSpecific != 0 {
			l.Granted.ServiceSpecific = r.uvarint()
		}
		l.ValidityTime = uint32(r.uvarint())
		l.QuotaHoldingTime = uint32(r.uvarint())
		dst = append(dst, l)
	}
	return dst
}

// Open sessions per account. Each open session lives in the account
// record, so the record (read and written whole by every charging event
// of the account) grows by about SessionRecordBytes per open session
// with one rating group (TestRecordSizeOpenSessions measures it).
// DefaultMaxSessions keeps the session blob near 53 KB at the cap (52 bytes a session), well inside
// Aerospike's default 1 MiB record limit (max-record-size /
// write-block-size); MaxSessionsLimit, the most --max-sessions accepts,
// stays under it.
const (
	DefaultMaxSessions = 1024
	MaxSessionsLimit   = 8192
	SessionRecordBytes = record.SessionRecordBytes
)
