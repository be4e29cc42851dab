package wire

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

func TestAppendAndIterate(t *testing.T) {
	m := AppendHeader(nil, FlagRequest, CmdCreditControl, AppCreditControl, 7, 9)
	m = AppendString(m, CodeSessionID, AVPMandatory, 0, "abc") // padded to 12
	m, g := BeginGroup(m, CodeMSCC, AVPMandatory, 0)
	m = AppendUint32(m, CodeRatingGroup, AVPMandatory, 0, 10)
	m = AppendUint32(m, CodeQuotaHoldingTime, AVPMandatory, Vendor3GPP, 300)
	m = EndGroup(m, g)
	m = AppendUint64(m, CodeCCTotalOctets, AVPMandatory, 0, 1<<40)
	SetLength(m)
	h, err := ParseHeader(m)
	if err != nil || h.Length != uint32(len(m)) || h.Code != CmdCreditControl || h.HopByHop != 7 || h.EndToEnd != 9 || !h.IsRequest() {
		t.Fatalf("header %+v %v", h, err)
	}
	it := MessageIter(m)
	var a AVP
	var codes []uint32
	for it.Next(&a) {
		codes = append(codes, a.Code)
		switch a.Code {
		case CodeSessionID:
			if string(a.Data) != "abc" || len(a.Raw) != 12 {
				t.Fatalf("Session-Id %q raw %d", a.Data, len(a.Raw))
			}
		case CodeMSCC:
			in := NewIter(a.Data)
			var b AVP
			in.Next(&b)
			if v, ok := Uint32(b.Data); !ok || v != 10 {
				t.Fatalf("Rating-Group %v", b)
			}
			in.Next(&b)
			if v, _ := Uint32(b.Data); b.Vendor != Vendor3GPP || b.Flags&AVPVendor == 0 || v != 300 {
				t.Fatalf("QHT %+v", b)
			}
		case CodeCCTotalOctets:
			if v, ok := Uint64(a.Data); !ok || v != 1<<40 {
				t.Fatal(v)
			}
		}
	}
	if it.Err() != nil || len(codes) != 3 {
		t.Fatalf("codes %v err %v", codes, it.Err())
	}
	// Read it back from a stream.
	got, err := ReadMessage(bufio.NewReader(bytes.NewReader(m)), nil, 1024)
	if err != nil || !bytes.Equal(got, m) {
		t.Fatalf("ReadMessage %v", err)
	}
	if _, err := ReadMessage(bufio.NewReader(bytes.NewReader(m)), nil, 20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit: %v", err)
	}
}

func TestIterErrors(t *testing.T) {
	for _, b := range [][]byte{
		{0, 0, 1, 7},                   // shorter than an AVP header
		{0, 0, 1, 7, 0x40, 0, 0, 4},    // length below the header
		{0, 0, 1, 7, 0x40, 0, 0, 64},   // overruns
		{0, 0, 1, 7, 0xc0, 0, 0, 8, 0}, // vendor flag, length without vendor id
	} {
		it := NewIter(b)
		var a AVP
		if it.Next(&a) || !errors.Is(it.Err(), ErrAVPLength) || len(it.Bad()) == 0 {
			t.Fatalf("%x: next ok or err %v", b, it.Err())
		}
	}
	// An unpadded last AVP is tolerated and re-padded by AppendRaw.
	b := AppendString(nil, CodeSessionID, 0, 0, "abcde")[:13]
	it := NewIter(b)
	var a AVP
	if !it.Next(&a) || string(a.Data) != "abcde" || len(AppendRaw(nil, a.Raw)) != 16 {
		t.Fatalf("unpadded: %+v %v", a, it.Err())
	}
}
