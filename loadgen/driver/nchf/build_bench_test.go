package nchf

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// BenchmarkBuild: building one update request (body, path, headers' values).
func BenchmarkBuild(b *testing.B) {
	d, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, NFName: "nf"})
	if err != nil {
		b.Fatal(err)
	}
	ref := []byte("imsi-001010000000006.0123456789abcdef")
	ch := driver.Charge{Op: driver.ChargeUpdate, SUPI: []byte("imsi-001010000000006"), Session: ref, Seq: 2, RatingGroup: 10,
		Request: true, Requested: chf.Units{TotalVolume: 10 << 20}, Used: chf.Units{TotalVolume: 5 << 20}, Invoked: time.Now()}
	var m message
	b.ReportAllocs()
	for b.Loop() {
		d.build(&m, &ch)
	}
}
