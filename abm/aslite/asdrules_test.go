package aslite

import (
	"errors"
	"testing"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
)

// TestAerospikeRules pins the answers abm/aslite/difftest found Aerospike
// CE 8.1 gives, so that they hold where no asd binary is present.
func TestAerospikeRules(t *testing.T) {
	code := func(err error) types.ResultCode {
		if err == nil {
			return types.OK
		}
		var aerr *as.AerospikeError
		if !errors.As(err, &aerr) {
			t.Fatalf("no result code: %v", err)
		}
		return aerr.ResultCode
	}
	s := startServer(t, Config{ForbidTTL: true})
	c := newClient(t, s.Addr())
	pol := func(exists as.RecordExistsAction, gp as.GenerationPolicy, gen, exp uint32) *as.WritePolicy {
		p := as.NewWritePolicy(gen, exp)
		p.RecordExistsAction, p.GenerationPolicy = exists, gp
		return p
	}
	missing := key(t, "r", 1)
	for _, tc := range []struct {
		name string
		err  error
		want types.ResultCode
	}{
		{"update-only with generation, missing", c.Put(pol(as.UPDATE_ONLY, as.EXPECT_GEN_EQUAL, 1, 0), missing, as.BinMap{"a": 1}), types.KEY_NOT_FOUND_ERROR},
		{"update with generation, missing", c.Put(pol(as.UPDATE, as.EXPECT_GEN_EQUAL, 1, 0), missing, as.BinMap{"a": 1}), types.GENERATION_ERROR},
		{"put ttl 100, nsup-period 0", c.Put(pol(as.UPDATE, as.NONE, 0, 100), missing, as.BinMap{"a": 1}), types.FAIL_FORBIDDEN},
		{"touch ttl 100, missing", c.Touch(pol(as.UPDATE, as.NONE, 0, 100), missing), types.KEY_NOT_FOUND_ERROR},
		{"put never-expire", c.Put(pol(as.UPDATE, as.NONE, 0, as.TTLDontExpire), missing, as.BinMap{"a": 1}), types.OK},
		{"put default ttl", c.Put(pol(as.UPDATE, as.NONE, 0, as.TTLServerDefault), missing, as.BinMap{"b": 1}), types.OK},
		{"touch ttl 100, existing", c.Touch(pol(as.UPDATE, as.NONE, 0, 100), missing), types.FAIL_FORBIDDEN},
	} {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, tc.err, tc.want)
		}
	}
	ok, err := c.Delete(pol(as.UPDATE, as.EXPECT_GEN_EQUAL, 9, 0), key(t, "r", 2))
	if ok || err != nil {
		t.Errorf("delete of a missing record with a generation: %v, %v; want false, nil", ok, err)
	}
	// A scan naming bins leaves out the records holding none of them.
	if err := c.Put(nil, key(t, "r", 3), as.BinMap{"c": 1}); err != nil {
		t.Fatal(err)
	}
	rs, err := c.ScanAll(nil, "chf", "r", "a")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range rs.Results() {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, ok := r.Record.Bins["a"]; !ok {
			t.Errorf("record without bin a sent: %v", r.Record.Bins)
		}
		n++
	}
	if n != 1 {
		t.Errorf("scan of bin a: %d records, want 1", n)
	}
}
