package admission

import (
	"testing"
	"time"
)

// BenchmarkAcquireDone is the hot path: one admission decision and its
// completion, from one goroutine and from GOMAXPROCS goroutines.
func BenchmarkAcquireDone(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		l := New(Config{})
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if l.Acquire() {
				l.Done(time.Duration(500+i%2000)*time.Microsecond, true)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := New(Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if l.Acquire() {
					l.Done(time.Duration(500+i%2000)*time.Microsecond, true)
				}
				i++
			}
		})
	})
}
