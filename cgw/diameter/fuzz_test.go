package diameter

import (
	"testing"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// seedCCRs are valid CCRs of every kind, encoded by the loadgen client.
func seedCCRs() [][]byte {
	ident := gy.AppendIdentity(nil, "pgw.loadgen.test", "loadgen.test", "chf.test")
	reqs := []gy.Request{
		{SessionID: "pgw;1;1", Type: gy.Initial, IMSI: imsi1, Services: []gy.Service{{RatingGroup: 10, Request: true}}},
		{SessionID: "pgw;1;1", Type: gy.Update, Number: 1, IMSI: imsi1, Services: []gy.Service{
			{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 1 << 20}, Used: chf.Units{TotalVolume: 30, UplinkVolume: 10, DownlinkVolume: 20}},
			{RatingGroup: 20, Used: chf.Units{Time: 5}}}},
		{SessionID: "pgw;1;1", Type: gy.Termination, Number: 2, MSISDN: "4917012345", Services: []gy.Service{{RatingGroup: 20, Used: chf.Units{Time: 5}}}},
		{SessionID: "smsc;1;2", Type: gy.Event, IMSI: imsi1, Action: gy.DirectDebiting, HasAction: true, Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}},
		{SessionID: "smsc;1;3", Type: gy.Event, IMSI: imsi1, Action: gy.CheckBalance, HasAction: true},
	}
	var out [][]byte
	for i := range reqs {
		out = append(out, gy.AppendCCR(nil, ident, "32251@3gpp.org", &reqs[i], uint32(i+1), uint32(i+1)))
	}
	return out
}

// FuzzDecodeCCR feeds arbitrary bytes through the whole CCR path (decode,
// map, charge on the fake core, encode the CCA) and checks that it never
// panics and always produces a well-formed answer. Corpus: testdata/fuzz.
func FuzzDecodeCCR(f *testing.F) {
	for _, b := range seedCCRs() {
		f.Add(b)
	}
	b, _ := goDiameterCCR(f, 1).Serialize()
	f.Add(b)
	fc := newFakeCharger()
	fc.add(supi1, 1_000_000)
	s, err := NewServer(Config{Logger: quiet}, fc)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if h, err := wire.ParseHeader(msg); err != nil || int(h.Length) != len(msg) {
			return // the reader never hands such frames to the decoder
		}
		st := &ccrState{}
		out := s.answerCCR(msg, st)
		h, err := wire.ParseHeader(out)
		if err != nil || int(h.Length) != len(out) {
			t.Fatalf("bad CCA header %v: %x", err, out)
		}
		it := wire.MessageIter(out)
		var a wire.AVP
		result := uint32(0)
		for it.Next(&a) {
			if a.Code == wire.CodeResultCode {
				result, _ = wire.Uint32(a.Data)
			}
		}
		if it.Err() != nil || result == 0 {
			t.Fatalf("malformed CCA (err %v, result %d): %x", it.Err(), result, out)
		}
		if st.req.Session != "" && len(st.req.Session) > maxSessionKey {
			t.Fatalf("session key of %d bytes", len(st.req.Session))
		}
		var ans gy.Answer
		if err := gy.DecodeCCA(out, &ans); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLoadgenCCRRoundTrip(t *testing.T) {
	want := []chf.ChargeRequest{
		{Op: chf.OpCreate, SUPI: supi1, Session: "pgw;1;1", Lines: []chf.UsageLine{{RatingGroup: 10, Request: true}}},
		{Op: chf.OpUpdate, SUPI: supi1, Session: "pgw;1;1", Seq: 1, Lines: []chf.UsageLine{
			{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 1 << 20}, Used: chf.Units{TotalVolume: 30, UplinkVolume: 10, DownlinkVolume: 20}},
			{RatingGroup: 20, Used: chf.Units{Time: 5}}}},
		{Op: chf.OpRelease, SUPI: "msisdn-4917012345", Session: "pgw;1;1", Seq: 2, Lines: []chf.UsageLine{{RatingGroup: 20, Used: chf.Units{Time: 5}}}},
		{Op: chf.OpEvent, SUPI: supi1, Session: "smsc;1;2", Lines: []chf.UsageLine{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}},
		{Op: chf.OpBalance, SUPI: supi1},
	}
	for i, msg := range seedCCRs() {
		var c ccr
		decodeCCR(msg, &c)
		if c.result != 0 {
			t.Fatalf("%d: result %d", i, c.result)
		}
		var got chf.ChargeRequest
		c.fill(&got)
		w := want[i]
		if got.Op != w.Op || got.SUPI != w.SUPI || got.Session != w.Session || got.Seq != w.Seq || len(got.Lines) != len(w.Lines) {
			t.Fatalf("%d: got %+v want %+v", i, got, w)
		}
		for j := range w.Lines {
			if got.Lines[j] != w.Lines[j] {
				t.Fatalf("%d line %d: got %+v want %+v", i, j, got.Lines[j], w.Lines[j])
			}
		}
	}
}

func TestSessionKey(t *testing.T) {
	short := "pgw.example;1234;5678"
	if got := sessionKey([]byte(short)); got != short {
		t.Fatalf("short key changed: %q", got)
	}
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	k := sessionKey(long)
	if len(k) != 64 || k == string(long[:64]) || k != sessionKey(append([]byte(nil), long...)) {
		t.Fatalf("long key %q", k)
	}
	long[199]++
	if sessionKey(long) == k {
		t.Fatal("different Session-Ids share a key")
	}
}
