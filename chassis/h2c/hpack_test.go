package h2c

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// hpackPair runs x/net's decoder and ours side by side over the blocks
// of one connection.
type hpackPair struct {
	ref        *hpack.Decoder
	dec        *hpackDecoder
	refF, decF []hpack.HeaderField
	broken     bool // an error ended the connection
	maxStr     int
}

func newHpackPair(maxStr int) *hpackPair {
	p := &hpackPair{maxStr: maxStr}
	p.ref = hpack.NewDecoder(4096, func(f hpack.HeaderField) { p.refF = append(p.refF, f) })
	p.ref.SetMaxStringLength(maxStr)
	p.dec = newHpackDecoder(4096, maxStr, 1<<30, func(f hpack.HeaderField) {
		// The strings are valid only during the call.
		f.Name, f.Value = string([]byte(f.Name)), string([]byte(f.Value))
		p.decF = append(p.decF, f)
	})
	return p
}

// block decodes one header block, cut into frags, with both decoders and
// fails t unless they agree: both refuse it, or both emit the same fields.
func (p *hpackPair) block(t *testing.T, frags [][]byte) {
	t.Helper()
	if p.broken {
		return
	}
	p.refF, p.decF = p.refF[:0], p.decF[:0]
	var refErr, decErr error
	for i, f := range frags {
		end := i == len(frags)-1
		if refErr == nil {
			if _, refErr = p.ref.Write(f); refErr == nil && end {
				refErr = p.ref.Close()
			}
		}
		if decErr == nil {
			decErr = p.dec.fragment(f, end)
		}
	}
	if (refErr == nil) != (decErr == nil) {
		t.Fatalf("block %x: x/net says %v, ours %v", bytes.Join(frags, nil), refErr, decErr)
	}
	if refErr != nil {
		p.broken = true
		return
	}
	if !reflect.DeepEqual(p.refF, p.decF) {
		t.Fatalf("block %x:\nx/net %q\nours  %q", bytes.Join(frags, nil), p.refF, p.decF)
	}
}

// cut splits b into up to 3 fragments at random points.
func cut(rnd *rand.Rand, b []byte) [][]byte {
	var frags [][]byte
	for k := rnd.IntN(3); k > 0 && len(b) > 1; k-- {
		i := 1 + rnd.IntN(len(b)-1)
		frags = append(frags, b[:i])
		b = b[i:]
	}
	return append(frags, b)
}

// hpackBlocks encodes n blocks of realistic and odd fields with x/net's
// encoder (indexing, never-indexed literals, table size updates).
func hpackBlocks(rnd *rand.Rand, n int) [][]byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	names := []string{":method", ":path", ":scheme", ":authority", ":status", "content-type", "content-length", "x-chf-sent-us", "location", "accept-encoding", "x-custom", ""}
	values := []string{"POST", "GET", "/nchf-convergedcharging/v3/chargingdata", "http", "127.0.0.1:8080", "201", "application/json", "412", "", "gzip, deflate", "\x00\xff\x7f", "ÿé"}
	var blocks [][]byte
	for range n {
		buf.Reset()
		if rnd.IntN(8) == 0 {
			enc.SetMaxDynamicTableSizeLimit(uint32(rnd.IntN(5000)))
		}
		for range 1 + rnd.IntN(8) {
			f := hpack.HeaderField{Name: names[rnd.IntN(len(names))], Value: values[rnd.IntN(len(values))], Sensitive: rnd.IntN(3) == 0}
			if rnd.IntN(3) == 0 {
				f.Value += strconv.Itoa(rnd.IntN(1 << 20))
			}
			if rnd.IntN(20) == 0 {
				f.Value = string(bytes.Repeat([]byte{byte(rnd.IntN(256))}, rnd.IntN(300)))
			}
			enc.WriteField(f)
		}
		blocks = append(blocks, append([]byte(nil), buf.Bytes()...))
	}
	return blocks
}

func TestHpackDecoderMatchesXNet(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for conn := range 300 {
		maxStr := []int{0, 64, 1 << 20}[conn%3]
		p := newHpackPair(maxStr)
		for _, b := range hpackBlocks(rnd, 20) {
			// Some blocks damaged: a byte changed, cut short, or doubled.
			switch rnd.IntN(10) {
			case 0:
				b[rnd.IntN(len(b))] ^= byte(1 + rnd.IntN(255))
			case 1:
				b = b[:rnd.IntN(len(b))]
			case 2:
				b = append(b, b...)
			}
			if len(b) == 0 {
				continue
			}
			p.block(t, cut(rnd, b))
		}
	}
	// Random bytes, and the Huffman code of every byte.
	for range 5000 {
		b := make([]byte, 1+rnd.IntN(40))
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		newHpackPair(64).block(t, cut(rnd, b))
	}
	for sym := range 256 {
		s := string(bytes.Repeat([]byte{byte(sym)}, 1+sym%5))
		got, err := huffmanDecode(nil, 0, hpack.AppendHuffmanString(nil, s))
		if err != nil || string(got) != s {
			t.Fatalf("Huffman round trip of %q: %q, %v", s, got, err)
		}
	}
}

// FuzzHpackDecoderMatchesXNet compares the decoders on fuzzed blocks,
// each cut in two at a fuzzed point, decoded twice on one connection (so
// the dynamic table the first leaves is used by the second).
func FuzzHpackDecoderMatchesXNet(f *testing.F) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, b := range hpackBlocks(rnd, 30) {
		f.Add(b, uint8(len(b)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		if len(b) == 0 {
			return
		}
		i := int(at) % len(b)
		for _, maxStr := range []int{0, 16} {
			p := newHpackPair(maxStr)
			p.block(t, [][]byte{b[:i], b[i:]})
			p.block(t, [][]byte{b})
		}
	})
}

// requestBlocks returns a function encoding, on one connection, the
// header block of a loadgen update request: the template fields indexed
// (one byte each after the first block), the :path, the loadgen's
// timestamp and content-length never indexed.
func requestBlocks() func() []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	return func() []byte {
		buf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
		enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
		enc.WriteField(hpack.HeaderField{Name: ":authority", Value: "127.0.0.1:8080"})
		enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/nchf-convergedcharging/v3/chargingdata/imsi-001010000012345.0123456789abcdef/update", Sensitive: true})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		enc.WriteField(hpack.HeaderField{Name: "x-chf-sent-us", Value: "1764633600123456", Sensitive: true})
		enc.WriteField(hpack.HeaderField{Name: "content-length", Value: "412", Sensitive: true})
		return append([]byte(nil), buf.Bytes()...)
	}
}

// TestHpackDecoderAllocs checks the steady state: a request block of
// indexed fields and never-indexed literals allocates nothing.
func TestHpackDecoderAllocs(t *testing.T) {
	request := requestBlocks()
	n := 0
	d := newHpackDecoder(4096, 1<<20, 1<<20, func(f hpack.HeaderField) { n += len(f.Name) + len(f.Value) })
	if err := d.fragment(request(), true); err != nil {
		t.Fatal(err)
	}
	b := request()
	if allocs := testing.AllocsPerRun(100, func() {
		if err := d.fragment(b, true); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("a request block allocates %.1f times", allocs)
	}
	if n == 0 {
		t.Fatal("no field emitted")
	}
}

func BenchmarkHpackDecode(b *testing.B) {
	request := requestBlocks()
	first, blk := request(), request()
	n := 0
	emit := func(f hpack.HeaderField) { n += len(f.Value) }
	b.Run("xnet", func(b *testing.B) {
		d := hpack.NewDecoder(4096, emit)
		d.Write(first)
		d.Close()
		b.ReportAllocs()
		for b.Loop() {
			d.Write(blk)
			d.Close()
		}
	})
	b.Run("h2c", func(b *testing.B) {
		d := newHpackDecoder(4096, 1<<20, 1<<20, emit)
		d.fragment(first, true)
		b.ReportAllocs()
		for b.Loop() {
			d.fragment(blk, true)
		}
	})
}
