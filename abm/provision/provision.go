// Package provision writes account records straight into the store, as
// `chf provision`, the local runner (local) and tests do before any load:
// a range of SUPIs, each with a balance and optionally a credit limit and
// buckets, in the layout package abm/record shares with the ABM. It links
// the Aerospike client but not the ABM.
package provision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"

	"github.com/chf-testbed/testbed/abm/record"
	"github.com/chf-testbed/testbed/chf"
)

// ErrBadSUPI is returned for a first SUPI that is not "imsi-" and digits.
var ErrBadSUPI = errors.New("provision: SUPI must be imsi- followed by up to 15 digits")

// Config describes a range of accounts to create.
type Config struct {
	Namespace string // default "chf"
	Set       string // default "accounts"
	// First is the first SUPI ("imsi-001010000000001"); the next ones
	// count up keeping the number of digits.
	First    string
	Count    int
	Balance  int64  // minor units
	Currency string // default "EUR"
	// Overwrite replaces existing accounts (balance reset, sessions
	// dropped); otherwise existing accounts are left alone and counted as
	// skipped (the writes use CREATE_ONLY).
	Overwrite bool
	// Workers is the number of parallel writers (default 16).
	Workers int
	// Batch is the number of accounts written per batch request (default
	// 256; 1 writes each account with its own request).
	Batch int
	// CreditLimit > 0 provisions postpaid accounts: the balance may go
	// below zero down to -CreditLimit (minor units).
	CreditLimit int64
	// Buckets are allowances every account starts with (chf.Bucket with
	// Expires a validity in seconds from provisioning, 0 = none): usage of
	// their service is taken from them before the balance.
	Buckets []chf.Bucket
	// Now is the clock bucket validities start from (default time.Now).
	Now func() time.Time
}

// Result counts what Run did.
type Result struct {
	Created int // accounts written
	Skipped int // accounts that already existed (Overwrite false)
	Retried int // writes tried again after a transient answer (a timeout, a busy node)
}

// SUPI returns the SUPI i positions after first ("imsi-" + up to 15
// digits, width kept; see chf.SUPI). It fails when first is malformed or
// the range overflows its width.
func SUPI(first string, i int) (string, error) {
	p, err := parseFirst(first)
	if err != nil {
		return "", err
	}
	if !p.Fits(i) {
		return "", fmt.Errorf("%w: %s + %d overflows %d digits", ErrBadSUPI, first, i, p.Width)
	}
	return p.String(i), nil
}

// parseFirst parses a first SUPI of a provisioned range.
func parseFirst(first string) (chf.SUPI, error) {
	p, err := chf.ParseSUPI(first)
	if err != nil || p.Prefix != "imsi-" || p.Width > 15 {
		return chf.SUPI{}, fmt.Errorf("%w: %q", ErrBadSUPI, first)
	}
	return p, nil
}

// Run creates cfg.Count accounts starting at cfg.First with
// cfg.Balance minor units each, using cfg.Workers parallel writers.
// progress, when not nil, is called from one goroutine with the number of
// accounts done so far, at most every 1% and at the end.
func Run(ctx context.Context, client *as.Client, cfg Config, progress func(done, total int)) (Result, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = record.DefaultNamespace
	}
	if cfg.Set == "" {
		cfg.Set = record.Set
	}
	if cfg.Currency == "" {
		cfg.Currency = "EUR"
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Count < 0 || cfg.Balance < 0 {
		return Result{}, errors.New("abm: provision count and balance must not be negative")
	}
	if cfg.Count == 0 {
		return Result{}, nil
	}
	if _, err := SUPI(cfg.First, cfg.Count-1); err != nil {
		return Result{}, fmt.Errorf("cannot provision: %w", err)
	}
	first, _ := parseFirst(cfg.First) // checked by SUPI above
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	plan, due, err := record.NewBlob(cfg.Balance, cfg.CreditLimit, cfg.Buckets, now().Unix())
	if err != nil {
		return Result{}, err
	}

	wp := as.NewWritePolicy(0, 0)
	wp.SendKey = true
	wp.TotalTimeout = 0
	wp.SocketTimeout = 0
	if cfg.Overwrite {
		wp.RecordExistsAction = as.REPLACE
	} else {
		wp.RecordExistsAction = as.CREATE_ONLY
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, created, skipped, retried atomic.Int64
		errOnce                         sync.Once
		firstErr                        error
		wg                              sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	chunk := cfg.Batch
	bwp := as.NewBatchWritePolicy()
	bwp.SendKey = true
	bwp.RecordExistsAction = wp.RecordExistsAction
	bp := as.NewWriteBatchPolicy()
	bp.TotalTimeout, bp.SocketTimeout = 0, 0
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 32)
			bins := []*as.Bin{
				as.NewBin(record.BinBalance, cfg.Balance),
				as.NewBin(record.BinCurrency, cfg.Currency),
				as.NewBin(record.BinDebited, 0),
				as.NewBin(record.BinSessions, plan),
			}
			if due != record.DueNever {
				bins = append(bins, as.NewBin(record.BinDue, due))
			}
			ops := make([]*as.Operation, len(bins))
			for i, b := range bins {
				ops[i] = as.PutOp(b)
			}
			batch := make([]as.BatchRecordIfc, 0, chunk)
			for ctx.Err() == nil {
				start := int(next.Add(int64(chunk))) - chunk
				if start >= cfg.Count {
					return
				}
				end := min(start+chunk, cfg.Count)
				if chunk == 1 {
					buf = first.Append(buf[:0], start)
					key, err := as.NewKey(cfg.Namespace, cfg.Set, string(buf))
					if err != nil {
						fail(fmt.Errorf("cannot build key: %w", err))
						return
					}
					var aerr as.Error
					inDoubt := false
					for attempt := 0; ; attempt++ {
						aerr = client.PutBins(wp, key, bins...)
						if aerr == nil || !aerr.Matches(provisionRetryCodes...) || attempt+1 >= provisionAttempts || !provisionBackoff(ctx, attempt) {
							break
						}
						inDoubt = true
						retried.Add(1)
					}
					switch {
					case aerr == nil:
						created.Add(1)
					case !cfg.Overwrite && aerr.Matches(types.KEY_EXISTS_ERROR):
						// After a retried timeout the first write may have
						// landed: it is ours, not an existing account.
						if inDoubt {
							created.Add(1)
						} else {
							skipped.Add(1)
						}
					default:
						fail(fmt.Errorf("cannot write account %s: %w", buf, aerr))
						return
					}
					continue
				}
				batch = batch[:0]
				for i := start; i < end; i++ {
					buf = first.Append(buf[:0], i)
					key, err := as.NewKey(cfg.Namespace, cfg.Set, string(buf))
					if err != nil {
						fail(fmt.Errorf("cannot build key: %w", err))
						return
					}
					batch = append(batch, as.NewBatchWrite(bwp, key, ops...))
				}
				// A record that failed with a transient code (a timeout, a
				// busy key, a partition moving) is written again in the
				// next round; the rest is settled now.
				inDoubt := false
				for attempt := 0; len(batch) > 0; attempt++ {
					aerr := client.BatchOperate(bp, batch)
					last := attempt+1 >= provisionAttempts
					retry := batch[:0]
					for _, r := range batch {
						br := r.BatchRec()
						switch {
						case br.ResultCode == types.OK:
							created.Add(1)
						case !cfg.Overwrite && br.ResultCode == types.KEY_EXISTS_ERROR:
							if inDoubt {
								created.Add(1) // our own earlier write landed
							} else {
								skipped.Add(1)
							}
						case !last && provisionRetryable(br.ResultCode):
							retry = append(retry, r)
						default:
							if aerr == nil {
								aerr = br.Err
							}
							fail(fmt.Errorf("cannot write account %v: result %d: %w", br.Key.Value(), br.ResultCode, aerr))
							return
						}
					}
					batch = retry
					if len(batch) == 0 {
						break
					}
					inDoubt = true
					retried.Add(int64(len(batch)))
					if !provisionBackoff(ctx, attempt) {
						return
					}
					for _, r := range batch {
						br := r.BatchRec()
						br.ResultCode, br.Err, br.Record, br.InDoubt = types.NO_RESPONSE, nil, nil, false
					}
				}
			}
		}()
	}
	if progress != nil {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		step := max(cfg.Count/100, 1)
		last := 0
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-t.C:
				if n := int(created.Load() + skipped.Load()); n-last >= step {
					progress(n, cfg.Count)
					last = n
				}
			}
		}
		progress(int(created.Load()+skipped.Load()), cfg.Count)
	} else {
		wg.Wait()
	}
	res := Result{Created: int(created.Load()), Skipped: int(skipped.Load()), Retried: int(retried.Load())}
	if firstErr != nil {
		return res, firstErr
	}
	if err := ctx.Err(); err != nil && res.Created+res.Skipped < cfg.Count {
		return res, fmt.Errorf("cannot provision: %w", err)
	}
	return res, nil
}

// ParseBucket parses a bucket plan "SERVICE:UNITS[:VALIDITY]": SERVICE
// data (UNITS octets), voice (seconds) or sms (messages), VALIDITY a Go
// duration ("720h") or a number of days ("30d"), none when omitted. The
// returned bucket's Expires is the validity in seconds.
func ParseBucket(spec string) (chf.Bucket, error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return chf.Bucket{}, fmt.Errorf("bucket %q: want SERVICE:UNITS[:VALIDITY]", spec)
	}
	var b chf.Bucket
	switch parts[0] {
	case "data":
		b.Service = chf.ServiceData
	case "voice":
		b.Service = chf.ServiceVoice
	case "sms":
		b.Service = chf.ServiceSMS
	default:
		return chf.Bucket{}, fmt.Errorf("bucket %q: unknown service %q (want data, voice or sms)", spec, parts[0])
	}
	u, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || u == 0 {
		return chf.Bucket{}, fmt.Errorf("bucket %q: units must be a positive integer", spec)
	}
	b.Units = u
	if len(parts) == 3 {
		v := parts[2]
		var d time.Duration
		if n, ok := strings.CutSuffix(v, "d"); ok {
			days, err := strconv.ParseUint(n, 10, 16)
			if err != nil {
				return chf.Bucket{}, fmt.Errorf("bucket %q: validity %q: want a duration or N days (30d)", spec, v)
			}
			d = time.Duration(days) * 24 * time.Hour
		} else if d, err = time.ParseDuration(v); err != nil || d < time.Second {
			return chf.Bucket{}, fmt.Errorf("bucket %q: validity %q: want a duration of at least 1s or N days (30d)", spec, v)
		}
		b.Expires = int64(d / time.Second)
	}
	return b, nil
}

// provisionAttempts bounds the writes of one account: a store that is
// still settling (a replica catching up, a node overloaded) answers a
// provisioning write with a transient code, and the next attempt usually
// lands. Provisioning happens before any load, so a write again is the
// same state again.
const provisionAttempts = 8

// provisionRetryCodes are the result codes a provisioning write is tried
// again on.
var provisionRetryCodes = []types.ResultCode{
	types.TIMEOUT, types.KEY_BUSY, types.DEVICE_OVERLOAD, types.PARTITION_UNAVAILABLE,
	types.SERVER_NOT_AVAILABLE, types.NO_RESPONSE, types.NETWORK_ERROR, types.INVALID_NODE_ERROR,
	types.NO_AVAILABLE_CONNECTIONS_TO_NODE, types.MAX_RETRIES_EXCEEDED,
}

func provisionRetryable(rc types.ResultCode) bool {
	return slices.Contains(provisionRetryCodes, rc)
}

// provisionBackoff waits before attempt+1: 50 ms doubling, at most 1 s.
// It reports false when ctx ends first.
func provisionBackoff(ctx context.Context, attempt int) bool {
	d := min(50*time.Millisecond<<attempt, time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ParseHosts parses an --aerospike list of host:port seeds (the ABM's,
// `chf provision`'s and the local runner's flag).
func ParseHosts(list string) ([]*as.Host, error) {
	var hosts []*as.Host
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("cannot parse --aerospike %q: %w", a, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("cannot parse --aerospike %q: bad port", a)
		}
		hosts = append(hosts, as.NewHost(h, port))
	}
	if len(hosts) == 0 {
		return nil, errors.New("cannot use --aerospike: no host:port given")
	}
	return hosts, nil
}
