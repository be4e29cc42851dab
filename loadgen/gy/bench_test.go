package gy_test

import (
	"testing"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

func BenchmarkEncodeCCR(b *testing.B) {
	ident := gy.AppendIdentity(nil, "pgw1.loadgen.test", "loadgen.test", "chf.test")
	req := gy.Request{SessionID: "pgw1.loadgen.test;1700000000;42", Type: gy.Update, Number: 3, IMSI: "001010000000001",
		Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 3_500_000}}}}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = gy.AppendCCR(buf[:0], ident, "32251@3gpp.org", &req, 1, 1)
	}
}

func BenchmarkDecodeCCA(b *testing.B) {
	// A CCA as the CGW sends it for a data update (captured from the server).
	msg := []byte{1, 0, 0, 0xf8, 0x40, 0, 1, 0x10, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1}
	msg = append(msg[:0:0], msg...)
	msg = appendAVP(msg, 263, []byte("pgw1.loadgen.test;1700000000;42"))
	msg = appendAVP(msg, 268, []byte{0, 0, 7, 0xd1})
	msg = appendAVP(msg, 264, []byte("cgw.chf.test"))
	msg = appendAVP(msg, 296, []byte("chf.test"))
	msg = appendAVP(msg, 416, []byte{0, 0, 0, 2})
	msg = appendAVP(msg, 415, []byte{0, 0, 0, 3})
	gsu := appendAVP(nil, 421, []byte{0, 0, 0, 0, 0, 0x98, 0x96, 0x80})
	mscc := appendAVP(nil, 431, gsu)
	mscc = appendAVP(mscc, 432, []byte{0, 0, 0, 10})
	mscc = appendAVP(mscc, 448, []byte{0, 0, 7, 8})
	mscc = appendAVP(mscc, 268, []byte{0, 0, 7, 0xd1})
	msg = appendAVP(msg, 456, mscc)
	uv := appendAVP(nil, 447, []byte{0, 0, 0, 0, 0, 0, 0, 4})
	uv = appendAVP(uv, 429, []byte{0xff, 0xff, 0xff, 0xfe})
	ci := appendAVP(nil, 445, uv)
	ci = appendAVP(ci, 425, []byte{0, 0, 3, 0xd2})
	msg = appendAVP(msg, 423, ci)
	msg[1], msg[2], msg[3] = byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg))
	var a gy.Answer
	if err := gy.DecodeCCA(msg, &a); err != nil || a.ResultCode != 2001 || a.Charged != 4 || a.Grants[0].Granted.TotalVolume != 10_000_000 {
		b.Fatalf("%v %+v", err, a)
	}
	b.ReportAllocs()
	for b.Loop() {
		gy.DecodeCCA(msg, &a)
	}
}

func appendAVP(dst []byte, code uint32, data []byte) []byte {
	n := 8 + len(data)
	dst = append(dst, byte(code>>24), byte(code>>16), byte(code>>8), byte(code), 0x40, byte(n>>16), byte(n>>8), byte(n))
	dst = append(dst, data...)
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	return dst
}
