package h2c

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// responseBlock encodes the header block of a CGW create answer on l, as
// serverConn.finish does.
func responseBlock(l *link, location string) []byte {
	l.hbuf.Reset()
	l.encodeLocked(":status", "201", false)
	l.encodeLocked("content-type", "application/json", false)
	l.encodeLocked("location", location, true)
	l.encodeLocked("x-chf-charged", "1234", true)
	l.encodeLocked("content-length", "315", true)
	return l.hbuf.Bytes()
}

func newEncLink() *link {
	l := new(link)
	l.enc = hpack.NewEncoder(&l.hbuf)
	return l
}

// TestEncodeDecodes: every block, with sensitive fields and after a
// dynamic table size change, decodes (x/net's decoder) to the fields
// given, the sensitive ones marked never-indexed, and the table update
// first.
func TestEncodeDecodes(t *testing.T) {
	l := newEncLink()
	var got []hpack.HeaderField
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f) })
	names := []string{":path", ":authority", "content-length", "content-type", "location", "authorization", "retry-after",
		"www-authenticate", "date", "user-agent", "x-chf-charged", strings.Repeat("x", 200)}
	for i := range 6 {
		if i == 3 {
			// The peer's SETTINGS shrink the table: the next block must
			// start with the size update, whatever its fields.
			l.enc.SetMaxDynamicTableSizeLimit(256)
			l.enc.SetMaxDynamicTableSize(256)
			dec.SetMaxDynamicTableSize(256)
		}
		l.hbuf.Reset()
		want := []hpack.HeaderField{{Name: ":status", Value: "201"}, {Name: "content-type", Value: "application/json"}}
		for _, f := range want {
			l.encodeLocked(f.Name, f.Value, false)
		}
		for k, n := range names {
			f := hpack.HeaderField{Name: n, Value: strings.Repeat("v", k*13) + "é", Sensitive: true}
			l.encodeLocked(f.Name, f.Value, true)
			want = append(want, f)
		}
		got = got[:0]
		if _, err := dec.Write(l.hbuf.Bytes()); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if err := dec.Close(); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if len(got) != len(want) {
			t.Fatalf("block %d: %d fields, want %d", i, len(got), len(want))
		}
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("block %d field %d: %+v, want %+v", i, k, got[k], want[k])
			}
		}
	}
}

// TestStaticNameIndex: the hand-written indices are the first of each
// name in the static table read from x/net.
func TestStaticNameIndex(t *testing.T) {
	first := map[string]uint64{}
	for i, f := range hpackStatic {
		if _, ok := first[f.Name]; !ok {
			first[f.Name] = uint64(i + 1)
		}
	}
	n := 0
	for name, want := range first {
		if got := staticNameIndex(name); got != 0 {
			n++
			if got != want {
				t.Errorf("%s: index %d, the static table has it at %d", name, got, want)
			}
		}
	}
	if n != 10 || staticNameIndex("x-chf-charged") != 0 {
		t.Errorf("%d names indexed, want the switch's 10 and none other", n)
	}
}

// TestEncodeAllocs: encoding a response block allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	l := newEncLink()
	loc := "/nchf-convergedcharging/v3/chargingdata/imsi-001010000000001.0123456789abcdef"
	responseBlock(l, loc)
	if a := testing.AllocsPerRun(100, func() { responseBlock(l, loc) }); a != 0 {
		t.Fatalf("a response block allocates %.1f times", a)
	}
}

func BenchmarkHpackEncodeResponse(b *testing.B) {
	l := newEncLink()
	loc := "/nchf-convergedcharging/v3/chargingdata/imsi-001010000000001.0123456789abcdef"
	responseBlock(l, loc)
	b.ReportAllocs()
	for b.Loop() {
		responseBlock(l, loc)
	}
}
