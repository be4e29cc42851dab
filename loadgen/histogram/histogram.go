// Package histogram records latencies in HDR histograms (microsecond
// resolution, 1 µs to 60 s, 3 significant digits), merges them exactly and
// encodes them so results from separate runs or shards can be combined.
//
// A Histogram is not safe for concurrent use: keep one per goroutine and
// merge them when the goroutines are done.
package histogram

import (
	"errors"
	"fmt"
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Range of recordable values, in microseconds.
const (
	lowest       = 1
	highest      = 60_000_000
	sigFigs      = 3
	encodeCookie = hdr.V2CompressedEncodingCookieBase
)

// ErrDecode is returned for an encoded histogram that cannot be read.
var ErrDecode = errors.New("histogram: cannot decode")

// Histogram is a latency histogram in microseconds.
type Histogram struct {
	h *hdr.Histogram
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{h: hdr.New(lowest, highest, sigFigs)} }

// Record adds one latency; values outside the range are clamped so that a
// pathological sample is never lost.
func (h *Histogram) Record(d time.Duration) {
	us := d.Microseconds()
	if us < lowest {
		us = lowest
	} else if us > highest {
		us = highest
	}
	_ = h.h.RecordValue(us) // cannot fail: value is clamped into range
}

// RecordMicros adds n occurrences of a value in microseconds.
func (h *Histogram) RecordMicros(us, n int64) {
	if us < lowest {
		us = lowest
	} else if us > highest {
		us = highest
	}
	_ = h.h.RecordValues(us, n)
}

// Merge adds every sample of from into h. It is exact: both histograms have
// the same layout.
func (h *Histogram) Merge(from *Histogram) {
	if from == nil {
		return
	}
	h.h.Merge(from.h)
}

// Reset empties the histogram.
func (h *Histogram) Reset() { h.h.Reset() }

// Count returns the number of samples.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Equal reports whether both histograms hold the same samples.
func (h *Histogram) Equal(o *Histogram) bool { return h.h.Equals(o.h) }

// Encode returns the compressed, base64 HdrHistogram V2 encoding.
func (h *Histogram) Encode() (string, error) {
	b, err := h.h.Encode(encodeCookie)
	if err != nil {
		return "", fmt.Errorf("cannot encode histogram: %w", err)
	}
	return string(b), nil
}

// Decode reads what Encode wrote.
func Decode(s string) (*Histogram, error) {
	if s == "" {
		return New(), nil
	}
	h, err := hdr.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	// Re-home into the standard layout so merges stay exact.
	out := New()
	out.h.Merge(h)
	return out, nil
}

// Summary is the usual set of statistics, in milliseconds.
type Summary struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	// CV is the coefficient of variation (standard deviation / mean): the
	// jitter figure.
	CV float64 `json:"cv"`
}

// Summary computes percentiles, max, mean and jitter.
func (h *Histogram) Summary() Summary {
	s := Summary{Count: h.h.TotalCount()}
	if s.Count == 0 {
		return s
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	s.P50 = ms(h.h.ValueAtQuantile(50))
	s.P90 = ms(h.h.ValueAtQuantile(90))
	s.P99 = ms(h.h.ValueAtQuantile(99))
	s.P999 = ms(h.h.ValueAtQuantile(99.9))
	s.Max = ms(h.h.Max())
	mean := h.h.Mean()
	s.Mean = mean / 1000
	if mean > 0 {
		s.CV = h.h.StdDev() / mean
	}
	if math.IsNaN(s.CV) {
		s.CV = 0
	}
	return s
}

// Quantile returns the value at q (0..100) in milliseconds.
func (h *Histogram) Quantile(q float64) float64 {
	return float64(h.h.ValueAtQuantile(q)) / 1000
}

// Bucket is one bar of a latency distribution.
type Bucket struct {
	FromMs, ToMs float64
	Count        int64
}

// Distribution returns the non-empty buckets of the histogram on a
// logarithmic grid (for plotting).
func (h *Histogram) Distribution(perDecade int) []Bucket {
	if h.h.TotalCount() == 0 {
		return nil
	}
	var out []Bucket
	step := math.Pow(10, 1/float64(perDecade))
	lo := 1.0 // µs
	maxV := float64(h.h.Max())
	bars := h.h.Distribution()
	i := 0
	for lo <= maxV {
		hi := lo * step
		var n int64
		for i < len(bars) && float64(bars[i].From) < hi {
			n += bars[i].Count
			i++
		}
		if n > 0 {
			out = append(out, Bucket{FromMs: lo / 1000, ToMs: hi / 1000, Count: n})
		}
		lo = hi
	}
	return out
}

// CountAtOrAbove returns how many samples are at or above d (to the
// histogram's precision).
func (h *Histogram) CountAtOrAbove(d time.Duration) int64 {
	us := d.Microseconds()
	var n int64
	for _, b := range h.h.Distribution() {
		if b.To > us {
			n += b.Count
		}
	}
	return n
}
