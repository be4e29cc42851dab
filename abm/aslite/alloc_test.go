package aslite

import (
	"testing"

	as "github.com/aerospike/aerospike-client-go/v7"
)

// buildMsg encodes an AS_MSG body for the chf namespace.
func buildMsg(info1, info2 byte, gen uint32, d []byte, ops ...wireOp) []byte {
	b := appendMsgHeader(nil, 0, 0, gen, 0, 0, 3, len(ops))
	b[1], b[2] = info1, info2
	b = appendField(b, fieldNamespace, []byte("chf"))
	b = appendField(b, fieldSet, []byte("accounts"))
	b = appendField(b, fieldDigest, d)
	for _, op := range ops {
		n := len(b)
		b = appendOp(b, op.ptype, op.name, op.val)
		b[n+4] = op.op
	}
	return b
}

// TestHotPathAllocs locks in that get, put, generation-checked put and
// operate allocate nothing in the server once a connection is warm.
func TestHotPathAllocs(t *testing.T) {
	s, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger(), ReclaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := connPool.New().(*conn)
	c.nc = &fakeConn{}
	k, _ := as.NewKey("chf", "accounts", "imsi-001010000000001")
	bal := []byte{0, 0, 0, 0, 0, 0, 0, 100}
	res := make([]byte, 100)
	put := buildMsg(0, info2Write, 0, k.Digest(),
		wireOp{op: opWrite, ptype: ptInteger, name: []byte("balance"), val: bal},
		wireOp{op: opWrite, ptype: ptString, name: []byte("currency"), val: []byte("EUR")},
		wireOp{op: opWrite, ptype: ptBlob, name: []byte("res"), val: res})
	genPut := buildMsg(0, info2Write|info2Generation, 0, k.Digest(),
		wireOp{op: opWrite, ptype: ptInteger, name: []byte("balance"), val: bal})
	get := buildMsg(info1Read|info1GetAll, 0, 0, k.Digest())
	operate := buildMsg(info1Read|info1GetAll, info2Write, 0, k.Digest(),
		wireOp{op: opIncr, ptype: ptInteger, name: []byte("balance"), val: bal},
		wireOp{op: opRead})
	run := func(msg []byte) byte {
		c.out = c.out[:0]
		if err := s.handleMsg(c, msg); err != nil {
			t.Fatal(err)
		}
		return c.out[8+5]
	}
	if rc := run(put); rc != rcOK {
		t.Fatalf("put rc %d", rc)
	}
	cases := []struct {
		name string
		msg  func() []byte
	}{
		{"get", func() []byte { return get }},
		{"put", func() []byte { return put }},
		{"operate", func() []byte { return operate }},
		{"generation put", func() []byte {
			c.out = c.out[:0]
			s.handleMsg(c, get)
			copy(genPut[6:10], c.out[8+6:8+10])
			return genPut
		}},
	}
	for _, tc := range cases {
		run(tc.msg()) // warm up
		allocs := testing.AllocsPerRun(200, func() {
			if rc := run(tc.msg()); rc != rcOK {
				t.Fatalf("%s: rc %d", tc.name, rc)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per request, want 0", tc.name, allocs)
		}
	}
}

// BenchmarkHandle measures decoding and executing a request in process,
// without the network: what aslite itself adds to the syscalls.
func BenchmarkHandle(b *testing.B) {
	s, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger(), ReclaimInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := connPool.New().(*conn)
	c.nc = &fakeConn{}
	k, _ := as.NewKey("chf", "accounts", "imsi-001010000000001")
	bal := []byte{0, 0, 0, 0, 0, 0, 0, 100}
	put := buildMsg(0, info2Write, 0, k.Digest(),
		wireOp{op: opWrite, ptype: ptInteger, name: []byte("balance"), val: bal},
		wireOp{op: opWrite, ptype: ptString, name: []byte("currency"), val: []byte("EUR")},
		wireOp{op: opWrite, ptype: ptBlob, name: []byte("res"), val: make([]byte, 100)})
	get := buildMsg(info1Read|info1GetAll, 0, 0, k.Digest())
	for _, bc := range []struct {
		name string
		msg  []byte
	}{{"put", put}, {"get", get}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.out = c.out[:0]
				if err := s.handleMsg(c, bc.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
