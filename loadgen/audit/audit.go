// Package audit reconciles balances after a load run, twice: for every
// subscriber the run touched, what the account paid (initial minus final
// balance, plus the overage the CHF recorded for usage beyond the balance)
// must equal what the audit rated on its own from the tariff for what the
// load generator sent (Tariff.Rate, independent of what the CHF reports),
// and the debit must equal the sum of what the CHF reported charging
// (X-Chf-Charged); no balance may be negative and no reservation may be
// left once every session ended.
//
// Balances are read through an HTTP driver (GET /chf/v1/accounts/{supi}),
// many at a time: the load's own, or for a Diameter Gy load one to the
// CGW's HTTP port; Gy answers' Cost-Information plays X-Chf-Charged's part. The audit does not judge
// requests whose outcome the load generator never learned (timeouts,
// connection failures): it reports their number beside the verdict. It
// fails when the run lost usage (engine.UsageLost: reported usage that no
// attempt delivered, retries included): such units were neither charged
// nor refused.
package audit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// ErrRead is returned when balances cannot be read.
var ErrRead = errors.New("audit: cannot read balances")

// Account is one balance as read.
type Account struct {
	Balance  int64
	Reserved int64
	Overage  int64 // usage the CHF recorded beyond the balance
	Found    bool
	// CreditLimit: a postpaid balance may go down to -CreditLimit.
	// Offline is the running total of offline usage rated; Buckets the
	// units of the live buckets by service (nchf.BucketData, ...).
	CreditLimit int64
	Offline     int64
	Buckets     [nchf.NumBucketServices]uint64
}

// Snapshot holds the balances of a set of subscriber indexes.
type Snapshot struct {
	Index    []int32 // subscriber indexes read, ascending
	Accounts []Account
	Failed   int // reads that failed (transport or non-200 other than 404)
}

// Get returns the account of subscriber i, if it was read.
func (s *Snapshot) Get(i int32) (Account, bool) {
	k := sort.Search(len(s.Index), func(j int) bool { return s.Index[j] >= i })
	if k < len(s.Index) && s.Index[k] == i {
		return s.Accounts[k], true
	}
	return Account{}, false
}

// AllIndexes returns 0..n-1.
func AllIndexes(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// giveUpAfter is how many failed reads, with none succeeded, end Read.
const giveUpAfter = 64

// Read fetches the balances of the given subscriber indexes (ascending)
// with up to concurrency requests in flight. When the first giveUpAfter
// reads all fail (a silent or absent CHF), it stops and returns an error
// wrapping ErrRead instead of waiting out every read's timeout; a read
// refused for want of the operator token (nchf.ErrUnauthorized) stops it
// at once, with an error wrapping both.
func Read(ctx context.Context, d *nchf.Driver, first scenario.SUPI, idx []int32, concurrency int) (*Snapshot, error) {
	if concurrency <= 0 {
		concurrency = 128
	}
	s := &Snapshot{Index: idx, Accounts: make([]Account, len(idx))}
	// A CHF that answers none of the first reads (silent, or gone) ends
	// the audit instead of costing every read its timeout.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var failed, succeeded atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := d.NewAccountReader()
			var supi []byte
			for {
				k := int(next.Add(1) - 1)
				if k >= len(idx) || ctx.Err() != nil {
					return
				}
				supi = first.Append(supi[:0], int(idx[k]))
				var a nchf.Account
				var err error
				for try := 0; try < 3; try++ {
					if a, err = rd.ReadAccount(ctx, k%d.Targets(), supi); err == nil || errors.Is(err, nchf.ErrUnauthorized) {
						break
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					if errors.Is(err, nchf.ErrUnauthorized) {
						// Every other read would be refused too.
						cancel(err)
					}
					if failed.Add(1) >= giveUpAfter && succeeded.Load() == 0 {
						cancel(fmt.Errorf("the first %d reads failed, none succeeded; first: %w", giveUpAfter, firstErr))
					}
					continue
				}
				succeeded.Add(1)
				if a.Found {
					s.Accounts[k] = Account{Balance: a.Balance, Reserved: a.Reserved, Overage: a.Overage, Found: true,
						CreditLimit: a.CreditLimit, Offline: a.Offline, Buckets: a.Buckets}
				}
			}
		}()
	}
	wg.Wait()
	s.Failed = int(failed.Load())
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrRead, context.Cause(ctx))
	}
	if s.Failed == len(idx) && len(idx) > 0 {
		return nil, fmt.Errorf("%w: every read failed, first: %v", ErrRead, firstErr)
	}
	return s, nil
}

// Result is the verdict, as written into reports.
type Result struct {
	OK         bool   `json:"ok"`
	Skipped    bool   `json:"skipped,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Touched    int    `json:"subscribers_touched"`
	Checked    int    `json:"subscribers_checked"`
	Charged    int64  `json:"charged_total"` // sum of X-Chf-Charged
	Debited    int64  `json:"debited_total"` // sum of initial - final over checked subscribers
	Mismatches int    `json:"mismatches"`    // subscribers whose delta != charged
	// The independent check (when Input.Expected is set): Expected is
	// the sum of the audit's own rating of what was sent, Overage the sum
	// of the overage the CHF recorded during the run, and
	// ExpectedMismatches the subscribers whose delta + overage differs
	// from their expectation.
	Independent        bool  `json:"independent"`
	Expected           int64 `json:"expected_total"`
	Overage            int64 `json:"overage_total"`
	ExpectedMismatches int   `json:"expected_mismatches"`
	// Offline is the offline usage the CHF recorded during the run
	// (rated, never debited); BucketValue what the bucket units consumed
	// are worth at the tariff's price (voice and sms, priced per unit):
	// both count towards the expectation. BucketInexact counts the
	// subscribers left out of the independent check because a bucket
	// whose service is priced per block of units (data) paid part of
	// their usage: what money paid then depends on how each charge was
	// split.
	Offline       int64 `json:"offline_total"`
	BucketValue   int64 `json:"bucket_value"`
	BucketInexact int   `json:"bucket_inexact"`
	Negative      int   `json:"negative_balances"`
	Reserved      int   `json:"reserved_left"` // accounts with a reservation left
	Unreadable    int   `json:"unreadable"`    // accounts that could not be read
	Unresolved    int64 `json:"unresolved_requests"`
	NoHeader      int64 `json:"answers_without_charged_header"`
	// UsageLost counts the requests whose usage was not delivered
	// (report.Result's usage_lost has the detail); not zero fails.
	UsageLost int64    `json:"usage_lost_requests"`
	Examples  []string `json:"examples,omitempty"`
	// CDR is the CDR check (loadgen local --cdr-dir, AddCDR); Debits the
	// checked subscribers' debits it compares with (not in reports).
	CDR    *CDRResult `json:"cdr,omitempty"`
	Debits []Debit    `json:"-"`
}

// Input is what Check compares.
type Input struct {
	First scenario.SUPI
	// Initial balances; nil with InitialBalance set when every account is
	// known to start at that balance (freshly provisioned).
	Initial        *Snapshot
	InitialBalance int64
	Final          *Snapshot
	Ledger         *engine.Ledger
	// Expected is the audit's own expectation per subscriber (the engine's
	// ledger of Tariff.Rate over every charge answered as charged); nil
	// skips the independent check.
	Expected   Expectation
	Unresolved int64
	NoHeader   int64
	// UsageLost is the run's undelivered usage (engine.Stats.UsageLost).
	UsageLost engine.UsageLost
	// InitialOf, when set (with Initial nil), gives each subscriber's
	// initial state as provisioned (postpaid balances, buckets) instead
	// of InitialBalance.
	InitialOf func(i int32) Account
	// Tariff prices the bucket units consumed (BucketValue); nil = the
	// built-in tariff.
	Tariff *Tariff
}

// Expectation is what a run expects each subscriber to have paid, in minor
// units, as rated by the audit (the engine's Ledger.Expected).
type Expectation interface {
	Expected(i int32) int64
}

// Check reconciles the final snapshot against the initial one and the
// ledger. Every subscriber in Final is checked: touched ones must have
// moved by exactly what was charged, untouched ones not at all.
func Check(in Input) Result {
	r := Result{Charged: in.Ledger.Total, Unresolved: in.Unresolved, NoHeader: in.NoHeader, UsageLost: in.UsageLost.Requests}
	tariff := in.Tariff
	if tariff == nil {
		tariff, _ = LoadTariff("")
	}
	r.Touched = len(in.Ledger.TouchedList())
	example := func(format string, a ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	for k, i := range in.Final.Index {
		fin := in.Final.Accounts[k]
		if !fin.Found {
			if in.Ledger.Touched(i) && in.Ledger.Charged(i) != 0 {
				r.Unreadable++
				example("%s: charged %d but account not found at the end", in.First.String(int(i)), in.Ledger.Charged(i))
			}
			continue
		}
		var ini, iniOver int64
		var start Account
		switch {
		case in.Initial != nil:
			a, ok := in.Initial.Get(i)
			if !ok || !a.Found {
				if in.Ledger.Touched(i) {
					r.Unreadable++
				}
				continue
			}
			start = a
		case in.InitialOf != nil:
			start = in.InitialOf(i)
		default:
			start = Account{Balance: in.InitialBalance}
		}
		ini, iniOver = start.Balance, start.Overage
		r.Checked++
		delta := ini - fin.Balance
		r.Debited += delta
		r.Debits = append(r.Debits, Debit{Index: i, Amount: delta})
		if want := in.Ledger.Charged(i); delta != want {
			r.Mismatches++
			example("%s: initial %d - final %d = %d, CHF reported charging %d", in.First.String(int(i)), ini, fin.Balance, delta, want)
		}
		off := fin.Offline - start.Offline
		r.Offline += off
		bval, exact := tariff.bucketValue(&start, &fin)
		r.BucketValue += bval
		if in.Expected != nil && !exact {
			r.BucketInexact++
		} else if in.Expected != nil {
			over := fin.Overage - iniOver
			want := in.Expected.Expected(i)
			r.Overage += over
			r.Expected += want
			if got := delta + over + off + bval; got != want {
				r.ExpectedMismatches++
				example("%s: debited %d + overage %d + offline %d + buckets' value %d = %d, the tariff rates what was sent at %d",
					in.First.String(int(i)), delta, over, off, bval, got, want)
			}
		}
		if fin.Balance < -fin.CreditLimit {
			r.Negative++
			example("%s: balance %d below its credit limit %d", in.First.String(int(i)), fin.Balance, fin.CreditLimit)
		}
		if fin.Reserved != 0 {
			r.Reserved++
			example("%s: %d still reserved after every session ended", in.First.String(int(i)), fin.Reserved)
		}
	}
	r.Unreadable += in.Final.Failed
	r.Independent = in.Expected != nil
	r.OK = r.Mismatches == 0 && r.ExpectedMismatches == 0 && r.Negative == 0 && r.Reserved == 0 && r.Unreadable == 0 && r.Checked > 0
	if r.Checked == 0 {
		r.Reason = "no account could be checked"
	} else if !r.OK {
		r.Reason = fmt.Sprintf("%d mismatches with the reported charges, %d with the tariff, %d negative, %d reservations left, %d unreadable",
			r.Mismatches, r.ExpectedMismatches, r.Negative, r.Reserved, r.Unreadable)
	}
	if r.UsageLost > 0 {
		r.OK = false
		r.Reason = joinReason(r.Reason, LostReason(in.UsageLost))
	}
	if !r.OK && in.Unresolved > 0 {
		r.Reason += fmt.Sprintf(" (%d requests had an unknown outcome)", in.Unresolved)
	}
	return r
}

// LostReason says what a run's lost usage is, for the audit's reason and
// the reports.
func LostReason(l engine.UsageLost) string {
	s := fmt.Sprintf("usage lost: %d requests' usage not delivered after the retries (%d refused, %d in doubt, %d abandoned at the end; volume %d octets, time %d s, %d service units",
		l.Requests, l.Refused, l.InDoubt, l.Abandoned, l.TotalVolume, l.Time, l.ServiceSpecificUnits)
	if l.Rated {
		s += fmt.Sprintf(", rated %d minor units", l.ExpectedMinorUnits)
	}
	return s + ")"
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
