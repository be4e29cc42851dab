package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseShard reads "i/n" (0 <= i < n).
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("cannot parse shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// Shard returns shard i of n of sc: a contiguous slice of the subscriber
// range, 1/n of the offered load and its own seed. sc must be valid and
// have at least n subscribers for every shard to have one.
func Shard(sc Scenario, i, n int) Scenario {
	first, _ := ParseSUPI(sc.Subscribers.First)
	lo := sc.Subscribers.Count * i / n
	hi := sc.Subscribers.Count * (i + 1) / n
	sc.Subscribers.First = first.String(lo)
	sc.Subscribers.Count = hi - lo
	sc.Load.TPS /= float64(n)
	sc.Load.SessionsPerSecond /= float64(n)
	sc.Seed += int64(i) * 7919
	return sc
}

// Hash identifies what a scenario offers (everything but its
// thresholds): shards of one run carry the hash of the unsharded
// scenario, so that merging can refuse results of different runs.
func (s Scenario) Hash() string {
	s.Thresholds = nil
	b, err := json.Marshal(s)
	if err != nil {
		panic("BUG: cannot encode a scenario: " + err.Error())
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// rangeFits reports whether offsets 0..n-1 of first stay within its
// digits (ParseSUPI allows at most 19, so 10^Width fits in a uint64).
func rangeFits(first SUPI, n int) bool {
	if n <= 0 {
		return true
	}
	limit := uint64(1)
	for range first.Width {
		limit *= 10
	}
	return first.Number < limit && uint64(n-1) < limit-first.Number
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
