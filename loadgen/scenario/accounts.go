package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chf/checked"
)

// Accounts gives shares of the subscriber range provisioned other than
// prepaid with money only, and a share of sessions charged offline:
//
//	accounts:
//	  postpaid: 0.1          # the first 10% of the range: postpaid
//	  credit_limit: 50000000 # their credit limit, minor units
//	  postpaid_balance: 0    # and their starting balance
//	  buckets: 0.1           # the next 10%: prepaid with the bucket plan
//	  bucket_plan: ["voice:600:30d", "sms:100"]
//	  offline: 0.05          # 5% of the sessions report OFFLINE_CHARGING
//
// `loadgen local` provisions the ranges (the audit then knows their
// initial state); against a remote CHF they must be provisioned so
// (`chf provision --first --accounts --credit-limit --bucket`), and the
// audit reads the initial state. Postpaid balances may go below zero down
// to minus the credit limit; buckets pay their service's usage before
// money; offline usage is rated and recorded, never debited. The audit
// models all three (loadgen/audit).
type Accounts struct {
	Postpaid        float64  `yaml:"postpaid,omitempty" json:"postpaid,omitempty"`
	CreditLimit     int64    `yaml:"credit_limit,omitempty" json:"credit_limit,omitempty"`
	PostpaidBalance int64    `yaml:"postpaid_balance,omitempty" json:"postpaid_balance,omitempty"`
	Buckets         float64  `yaml:"buckets,omitempty" json:"buckets,omitempty"`
	BucketPlan      []string `yaml:"bucket_plan,omitempty" json:"bucket_plan,omitempty"`
	// Offline is the share of data and voice sessions whose usage reports
	// carry quotaManagementIndicator OFFLINE_CHARGING (Nchf only).
	Offline float64 `yaml:"offline,omitempty" json:"offline,omitempty"`
}

// Bucket is one allowance of a bucket plan.
type Bucket struct {
	Service  string        // data, voice, sms
	Units    uint64        // octets, seconds, messages
	Validity time.Duration // 0 = none
}

// ParseBucket reads SERVICE:UNITS[:VALIDITY] (VALIDITY a Go duration or
// N days, "30d"), the syntax of chf provision --bucket.
func ParseBucket(s string) (Bucket, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Bucket{}, fmt.Errorf("bucket %q: want SERVICE:UNITS[:VALIDITY]", s)
	}
	b := Bucket{Service: parts[0]}
	switch b.Service {
	case "data", "voice", "sms":
	default:
		return Bucket{}, fmt.Errorf("bucket %q: service %q: want data, voice or sms", s, parts[0])
	}
	u, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || u == 0 {
		return Bucket{}, fmt.Errorf("bucket %q: units must be a positive integer", s)
	}
	b.Units = u
	if len(parts) == 3 {
		v := parts[2]
		if d, ok := strings.CutSuffix(v, "d"); ok {
			n, err := strconv.ParseInt(d, 10, 64)
			days, ok := checked.MulI64(n, int64(24*time.Hour))
			if err != nil || n <= 0 || !ok {
				return Bucket{}, fmt.Errorf("bucket %q: validity %q: want a duration or N days (at most 106751)", s, v)
			}
			b.Validity = time.Duration(days)
		} else if b.Validity, err = time.ParseDuration(v); err != nil || b.Validity < time.Second {
			return Bucket{}, fmt.Errorf("bucket %q: validity %q: want a duration of at least 1s or N days", s, v)
		}
	}
	return b, nil
}

// Enabled reports whether any share is set.
func (a *Accounts) Enabled() bool { return a.Postpaid > 0 || a.Buckets > 0 || a.Offline > 0 }

// PostpaidRange returns the subscriber indexes [lo, hi) provisioned
// postpaid in a range of count, BucketRange those with the bucket plan.
func (a *Accounts) PostpaidRange(count int) (lo, hi int) {
	return 0, int(math.Round(a.Postpaid * float64(count)))
}

// BucketRange: see PostpaidRange.
func (a *Accounts) BucketRange(count int) (lo, hi int) {
	_, p := a.PostpaidRange(count)
	return p, p + int(math.Round(a.Buckets*float64(count)))
}

func (a *Accounts) validate(bad func(field, format string, a ...any) error) error {
	switch {
	case !share(a.Postpaid):
		return bad("accounts.postpaid", "must be a share 0..1, got %v", a.Postpaid)
	case !share(a.Buckets):
		return bad("accounts.buckets", "must be a share 0..1, got %v", a.Buckets)
	case a.Postpaid+a.Buckets > 1:
		return bad("accounts", "postpaid + buckets must be at most 1, got %v", a.Postpaid+a.Buckets)
	case !share(a.Offline):
		return bad("accounts.offline", "must be a share 0..1, got %v", a.Offline)
	case a.CreditLimit < 0:
		return bad("accounts.credit_limit", "must not be negative, got %d", a.CreditLimit)
	case a.Postpaid > 0 && a.CreditLimit == 0:
		return bad("accounts.credit_limit", "postpaid accounts need a credit limit > 0")
	case a.PostpaidBalance < 0:
		return bad("accounts.postpaid_balance", "must not be negative, got %d", a.PostpaidBalance)
	case a.Buckets > 0 && len(a.BucketPlan) == 0:
		return bad("accounts.bucket_plan", "bucket accounts need a plan (SERVICE:UNITS[:VALIDITY], ...)")
	}
	for i, b := range a.BucketPlan {
		if _, err := ParseBucket(b); err != nil {
			return bad(fmt.Sprintf("accounts.bucket_plan[%d]", i), "%v", err)
		}
	}
	return nil
}
