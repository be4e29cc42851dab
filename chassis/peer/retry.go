package peer

import "sync/atomic"

// retryBudget limits retries to a share of calls: every call deposits ratio
// of a token (capped), every retry withdraws one whole token. It starts with
// min tokens so that a quiet client can still retry.
type retryBudget struct {
	milli   atomic.Int64 // tokens × 1000
	deposit int64
	max     int64
}

func (b *retryBudget) init(ratio float64, minTokens int) {
	b.deposit = int64(ratio * 1000)
	if b.deposit < 1 {
		b.deposit = 1
	}
	b.max = int64(minTokens) * 1000
	if b.max < 1000 {
		b.max = 1000
	}
	b.milli.Store(b.max)
}

func (b *retryBudget) depositCall() {
	for {
		v := b.milli.Load()
		if v >= b.max {
			return
		}
		n := v + b.deposit
		if n > b.max {
			n = b.max
		}
		if b.milli.CompareAndSwap(v, n) {
			return
		}
	}
}

// withdraw takes one token for a retry; false when the budget is spent.
func (b *retryBudget) withdraw() bool {
	for {
		v := b.milli.Load()
		if v < 1000 {
			return false
		}
		if b.milli.CompareAndSwap(v, v-1000) {
			return true
		}
	}
}
