package aslite

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
)

// pieceKeys returns n keys of set "s" whose digests all fall in partition
// pid, in digest order (stored by digest: the client sends no user key).
func pieceKeys(t testing.TB, pid, n int) []*as.Key {
	t.Helper()
	keys := make([]*as.Key, n)
	for i := range keys {
		var d [20]byte
		binary.LittleEndian.PutUint16(d[:2], uint16(pid)) // the partition
		binary.BigEndian.PutUint32(d[2:6], uint32(i+1))   // the order
		k, err := as.NewKeyWithDigest("chf", "s", as.NewIntegerValue(i), d[:])
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	return keys
}

// TestScanPacedInPieces: a partition larger than a piece is sent in
// pieces, each under its own hold of the lock: with RecordsPerSecond the
// scan pauses between them, and a record deleted while the scan is paused
// is not sent; every other record comes once, in digest order, and the
// scan takes at least as long as its rate allows.
func TestScanPacedInPieces(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	const pid, n, rps, gone = 7, 3*scanPiece + 10, 2000, 100
	keys := pieceKeys(t, pid, n)
	for i, k := range keys {
		if err := c.Put(wp(), k, as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.RecordsPerSecond = rps
	start := time.Now()
	rs, err := c.ScanPartitions(sp, as.NewPartitionFilterById(pid), "chf", "s")
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for r := range rs.Results() {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if len(got) == 0 {
			// The first piece arrived, the scan now sleeps until it is
			// due (128 ms): delete the last records meanwhile.
			for _, k := range keys[n-gone:] {
				if _, err := c.Delete(wp(), k); err != nil {
					t.Fatal(err)
				}
			}
		}
		got = append(got, r.Record.Key.Digest())
	}
	took := time.Since(start)
	if len(got) != n-gone {
		t.Fatalf("scan sent %d records, want %d (%d deleted while it paused)", len(got), n-gone, gone)
	}
	for i, d := range got {
		if !bytes.Equal(d, keys[i].Digest()) {
			t.Fatalf("record %d of the scan is %x, want %x (digest order)", i, d, keys[i].Digest())
		}
	}
	// The pause after the partition waits until every record sent is
	// due at rps; the scan's end (its LAST header) comes after it.
	if min := time.Duration(len(got)) * time.Second / rps; took < min {
		t.Fatalf("scan of %d records at %d a second took %v, less than %v", len(got), rps, took, min)
	}
}

// TestScanPacedStopsWithServer: a scan paused by its rate ends when the
// server closes, not when its records are due.
func TestScanPacedStopsWithServer(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	const pid, n = 9, 2 * scanPiece
	for i, k := range pieceKeys(t, pid, n) {
		if err := c.Put(wp(), k, as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.RecordsPerSecond = 1 // the second piece is due in 256 s
	rs, err := c.ScanPartitions(sp, as.NewPartitionFilterById(pid), "chf", "s")
	if err != nil {
		t.Fatal(err)
	}
	first := <-rs.Results()
	if first == nil || first.Err != nil {
		t.Fatalf("first record: %+v", first)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s while a paced scan slept")
	}
	rs.Close()
}

// BenchmarkScanPartition: an unthrottled scan of one partition of 5,000
// records (a partition's share of 20 M accounts) through the official
// client; ns/op is per record.
//
//	go test -run '^$' -bench ScanPartition -count 10 ./abm/aslite
func BenchmarkScanPartition(b *testing.B) {
	benchScanPartition(b, nil)
}

// BenchmarkScanPartitionFiltered: the same scan with a sweep-like filter
// (an OR of three terms, every one evaluated for a record it rejects)
// that matches 5% of the records; ns/op is per record examined, to
// compare with BenchmarkScanPartition's per record sent.
func BenchmarkScanPartitionFiltered(b *testing.B) {
	te := as.ExpIntBin("te")
	benchScanPartition(b, as.ExpOr(
		as.ExpNot(as.ExpBinExists("te")),
		as.ExpLess(te, as.ExpIntVal(scanBenchRecords/20)),
		as.ExpAnd(as.ExpBinExists("te"), as.ExpNotEq(te, as.ExpIntVal(-1)), as.ExpLess(te, as.ExpIntVal(-1))),
	))
}

const scanBenchRecords = 5000

// benchScanPartition scans one partition of scanBenchRecords records
// (bins "sess", 120 bytes, and "te", 0 to scanBenchRecords-1) with the
// filter (nil = none), counting records examined.
func benchScanPartition(b *testing.B, filter *as.Expression) {
	s := startServer(b, Config{})
	c := newClient(b, s.Addr())
	const pid, n = 11, scanBenchRecords
	for i := 0; i < n; i++ {
		var d [20]byte
		binary.LittleEndian.PutUint16(d[:2], pid)
		binary.BigEndian.PutUint64(d[2:10], uint64(i)*0x9E3779B97F4A7C15) // not in digest order
		k, err := as.NewKeyWithDigest("chf", "s", as.NewIntegerValue(i), d[:])
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Put(wp(), k, as.BinMap{"sess": bytes.Repeat([]byte{1}, 120), "te": i}); err != nil {
			b.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.FilterExpression = filter
	want := n
	if filter != nil {
		want = n / 20
	}
	b.ResetTimer()
	examined, sent := 0, 0
	for examined < b.N {
		rs, err := c.ScanPartitions(sp, as.NewPartitionFilterById(pid), "chf", "s", "sess", "te")
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for r := range rs.Results() {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			got++
		}
		if got != want {
			b.Fatalf("scan sent %d records, want %d", got, want)
		}
		examined += n
		sent += got
	}
	b.StopTimer()
	b.ReportMetric(float64(sent)/float64(examined), "sent/record")
}

// TestScanPacedOutlastsWriteTimeout: a throttled scan may run for longer
// than WriteTimeout (a sweep's scan of millions of records does); each of
// its frames re-arms the deadline, so only a client that stops reading is
// cut off, not a slow scan. The client has few connections, so the scan
// runs on the connection whose deadline the puts before it armed.
func TestScanPacedOutlastsWriteTimeout(t *testing.T) {
	s := startServer(t, Config{WriteTimeout: 200 * time.Millisecond})
	c := newClientWith(t, s.Addr(), func(cp *as.ClientPolicy) { cp.ConnectionQueueSize = 2 })
	const pid, n, rps = 5, 3 * scanPiece, 1000 // ~0.77 s, four WriteTimeouts
	for i, k := range pieceKeys(t, pid, n) {
		if err := c.Put(wp(), k, as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.RecordsPerSecond = rps
	rs, err := c.ScanPartitions(sp, as.NewPartitionFilterById(pid), "chf", "s")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for r := range rs.Results() {
		if r.Err != nil {
			t.Fatalf("after %d records: %v", got, r.Err)
		}
		got++
	}
	if got != n {
		t.Fatalf("scan sent %d records, want %d", got, n)
	}
}
