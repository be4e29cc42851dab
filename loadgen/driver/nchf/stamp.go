package nchf

import "time"

// SenderTimestampHeader is TS 29.500's 3gpp-Sbi-Sender-Timestamp, which
// every request carries: when the loadgen sent it, in the format of TS
// 29.500 5.2.3.2.x, e.g. "Tue, 01 Dec 2026 14:00:00.123 GMT" (an
// HTTP-date with milliseconds, UTC).
const SenderTimestampHeader = "3gpp-sbi-sender-timestamp"

// senderTimestampLayout is the header's format as a time layout (for tests
// and readers; AppendSenderTimestamp writes it without parsing a layout).
const senderTimestampLayout = "Mon, 02 Jan 2006 15:04:05.000 GMT"

// stamp is a formatted sender timestamp, cached for its millisecond: each
// message keeps one, so a message reused within the same millisecond
// formats nothing, and none allocates.
type stamp struct {
	ms  int64 // Unix milliseconds of val; 0 = none yet
	val []byte
}

// at returns t's value (t in Unix milliseconds is formatted only when it
// differs from the cached one). The slice is owned by s and changes at the
// next call.
func (s *stamp) at(t time.Time) []byte {
	if ms := t.UnixMilli(); ms != s.ms || len(s.val) == 0 {
		s.ms = ms
		s.val = AppendSenderTimestamp(s.val[:0], t)
	}
	return s.val
}

var (
	dayNames   = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	monthNames = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// AppendSenderTimestamp appends t (in UTC, to the millisecond) in the
// 3gpp-Sbi-Sender-Timestamp format. It does not allocate when dst has room
// for the 33 bytes.
func AppendSenderTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	dst = append(dst, dayNames[t.Weekday()]...)
	dst = append(dst, ',', ' ')
	dst = append2(dst, d)
	dst = append(dst, ' ')
	dst = append(dst, monthNames[mo-1]...)
	dst = append(dst, ' ')
	dst = append2(dst, y/100)
	dst = append2(dst, y%100)
	dst = append(dst, ' ')
	dst = appendClock(dst, h, mi, sec)
	dst = append(dst, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(dst, " GMT"...)
}

// appendInvocationTimestamp appends t in UTC as
// "2006-01-02T15:04:05.000000000Z", what time.Time.AppendFormat gives for
// that layout, formatted by hand: AppendFormat parsed the layout for every
// request (about 4% of the loadgen's CPU).
func appendInvocationTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000000Z")
	}
	h, mi, sec := t.Clock()
	ns := t.Nanosecond()
	dst = append2(dst, y/100)
	dst = append2(dst, y%100)
	dst = append(dst, '-')
	dst = append2(dst, int(mo))
	dst = append(dst, '-')
	dst = append2(dst, d)
	dst = append(dst, 'T')
	dst = appendClock(dst, h, mi, sec)
	dst = append(dst, '.')
	var frac [9]byte
	for i := 8; i >= 0; i-- {
		frac[i] = byte('0' + ns%10)
		ns /= 10
	}
	dst = append(dst, frac[:]...)
	return append(dst, 'Z')
}

// appendClock appends "15:04:05".
func appendClock(dst []byte, h, mi, sec int) []byte {
	dst = append2(dst, h)
	dst = append(dst, ':')
	dst = append2(dst, mi)
	dst = append(dst, ':')
	return append2(dst, sec)
}

// append2 appends v (0..99) as two digits.
func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}
