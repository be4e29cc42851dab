// Package ocp is the Online Charging Processor: it rates the usage and
// quota requests of a chf.ChargeRequest with a tariff and hands the rated
// event to the ABM, which applies it to the account in one atomic step.
// It keeps no session state: any OCP instance serves any request. See
// README.md.
package ocp

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/tariff"
)

// Accounts is what the OCP needs of the ABM: apply one rated event to an
// account. abmclient.Client (over the chassis) and abm.Service (in process)
// implement it.
type Accounts interface {
	Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error
}

// BatchAccounts is implemented by Accounts that apply several events in
// one call (abmclient.Client merges them into one round trip, abm.Service into
// batched database commands). errs[i] is what Apply would have returned
// for reqs[i].
type BatchAccounts interface {
	ApplyBatch(ctx context.Context, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error)
}

// Processor rates charging requests and applies them through Accounts. It
// implements chf.Charger and is safe for concurrent use.
type Processor struct {
	tariff   atomic.Pointer[tariff.Tariff] // replaced whole by SetTariff
	accounts Accounts
	sink     cdr.Sink // nil = no charging data records
}

// NewProcessor returns a Processor rating with t (nil = the default
// tariff) against accounts.
func NewProcessor(t *tariff.Tariff, accounts Accounts) *Processor {
	if t == nil {
		t = tariff.Default()
	}
	p := &Processor{accounts: accounts}
	p.tariff.Store(t)
	return p
}

// Tariff returns the tariff p rates with now.
func (p *Processor) Tariff() *tariff.Tariff { return p.tariff.Load() }

// SetTariff makes p rate every later request with t (a reload, see
// WatchTariff). Requests being rated finish on the tariff they started
// with. Safe for concurrent use.
func (p *Processor) SetTariff(t *tariff.Tariff) { p.tariff.Store(t) }

// SetSink makes p hand every request the ABM answered to s (the CDR
// recorder). Call it before p serves.
func (p *Processor) SetSink(s cdr.Sink) { p.sink = s }

var applyPool = sync.Pool{New: func() any { return new(chf.ApplyRequest) }}

// Charge rates req and applies it to the account. Business outcomes are in
// resp.Result and the per-line results; an error means the ABM could not
// be reached or failed.
func (p *Processor) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	if res, detail := validate(req); res != chf.ResultSuccess {
		*resp = chf.ChargeResponse{Result: res, Detail: detail, Lines: resp.Lines[:0]}
		return nil
	}
	ar := applyPool.Get().(*chf.ApplyRequest)
	defer applyPool.Put(ar)
	p.Rate(req, ar)
	if refuseOverflow(ar, resp) {
		return nil
	}
	if err := p.accounts.Apply(ctx, ar, resp); err != nil {
		return err
	}
	p.arm(resp)
	if p.sink != nil {
		p.sink.Charged(ar, resp)
	}
	return nil
}

// arm fills each grant's threshold, triggers and final unit action from
// the tariff (the ABM decides units and FinalUnit; the tariff the rest).
func (p *Processor) arm(resp *chf.ChargeResponse) {
	t := p.tariff.Load()
	for i := range resp.Lines {
		if r := t.Rate(resp.Lines[i].RatingGroup); r != nil {
			r.Arm(&resp.Lines[i])
		}
	}
}

// batchScratch is the working memory of one ChargeBatch, pooled.
type batchScratch struct {
	ars   []chf.ApplyRequest
	reqs  []*chf.ApplyRequest
	resps []*chf.ChargeResponse
	errs  []error
	idx   []int
}

var batchPool = sync.Pool{New: func() any { return new(batchScratch) }}

// ChargeBatch runs reqs like Charge, as one batch towards the accounts
// when they implement BatchAccounts: resps[i] and errs[i] are what Charge
// would have answered for reqs[i].
func (p *Processor) ChargeBatch(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error) {
	sc := batchPool.Get().(*batchScratch)
	defer batchPool.Put(sc)
	sc.ars = slices.Grow(sc.ars[:0], len(reqs))[:len(reqs)]
	sc.reqs, sc.resps, sc.errs, sc.idx = sc.reqs[:0], sc.resps[:0], sc.errs[:0], sc.idx[:0]
	for i, req := range reqs {
		errs[i] = nil
		if res, detail := validate(req); res != chf.ResultSuccess {
			*resps[i] = chf.ChargeResponse{Result: res, Detail: detail, Lines: resps[i].Lines[:0]}
			continue
		}
		ar := &sc.ars[i]
		p.Rate(req, ar)
		if refuseOverflow(ar, resps[i]) {
			continue
		}
		sc.reqs = append(sc.reqs, ar)
		sc.resps = append(sc.resps, resps[i])
		sc.errs = append(sc.errs, nil)
		sc.idx = append(sc.idx, i)
	}
	if ba, ok := p.accounts.(BatchAccounts); ok && len(sc.reqs) > 0 {
		ba.ApplyBatch(ctx, sc.reqs, sc.resps, sc.errs)
	} else {
		for j := range sc.reqs {
			sc.errs[j] = p.accounts.Apply(ctx, sc.reqs[j], sc.resps[j])
		}
	}
	for j, i := range sc.idx {
		errs[i] = sc.errs[j]
		if errs[i] == nil {
			p.arm(resps[i])
			if p.sink != nil {
				p.sink.Charged(sc.reqs[j], sc.resps[j])
			}
		}
	}
	clear(sc.reqs)
	clear(sc.resps)
	clear(sc.errs)
}

// validate rejects requests no account could apply.
func validate(req *chf.ChargeRequest) (chf.Result, string) {
	if req.Op == chf.OpNotifications {
		return chf.ResultSuccess, "" // no subscriber: the ABM's queue
	}
	if req.SUPI == "" {
		return chf.ResultInvalid, "missing subscriber identifier"
	}
	switch req.Op {
	case chf.OpCreate, chf.OpUpdate, chf.OpRelease:
		if req.Session == "" {
			return chf.ResultInvalid, "missing session identifier"
		}
	case chf.OpEvent:
		if len(req.Lines) == 0 {
			return chf.ResultInvalid, "event without a rating group"
		}
	case chf.OpBalance, chf.OpSessions, chf.OpAbortSessions, chf.OpUnbar:
	case chf.OpTopUp:
		t := &req.TopUp
		if t.Amount < 0 {
			return chf.ResultInvalid, "top-up amount must not be negative"
		}
		if t.Bucket.Units > 0 && (t.Bucket.Service < chf.ServiceData || t.Bucket.Service > chf.ServiceSMS) {
			return chf.ResultInvalid, "top-up bucket of an unknown service"
		}
		if t.Bucket.Expires < 0 {
			return chf.ResultInvalid, "top-up bucket validity must not be negative"
		}
		if t.Amount == 0 && t.Bucket.Units == 0 {
			return chf.ResultInvalid, "top-up of nothing"
		}
	default:
		return chf.ResultInvalid, "unknown operation"
	}
	if len(req.Session) > 64 {
		return chf.ResultInvalid, "session identifier longer than 64 bytes"
	}
	for i := range req.Lines {
		for j := range i {
			if req.Lines[j].RatingGroup == req.Lines[i].RatingGroup {
				// One reservation per rating group and session: a second
				// line would be granted without money behind it.
				return chf.ResultInvalid, "rating group named twice"
			}
		}
	}
	return chf.ResultSuccess, ""
}

// rate is t's rate of rg (misrate_audittest.go skews it in the
// audit_misrate build).
func rate(t *tariff.Tariff, rg uint32) *tariff.Rate {
	return misrate(t.Rate(rg))
}

// Rate fills ar with req's lines rated on the tariff (ar.Lines reused).
// Lines of unknown rating groups get ResultRatingFailed.
func (p *Processor) Rate(req *chf.ChargeRequest, ar *chf.ApplyRequest) {
	ar.Reset()
	ar.Op, ar.SUPI, ar.Session, ar.Seq = req.Op, req.SUPI, req.Session, req.Seq
	// Every request carries the epoch, so the ABM learns of a new tariff
	// from the CGWs' polls (OpNotifications) even without traffic.
	t := p.tariff.Load()
	ar.Epoch = t.Epoch()
	if req.Op == chf.OpBalance || req.Op == chf.OpSessions || req.Op == chf.OpAbortSessions || req.Op == chf.OpUnbar || req.Op == chf.OpNotifications {
		return
	}
	if req.Op == chf.OpCreate {
		ar.Notify = append(ar.Notify[:0], req.Notify...)
	}
	if req.Op == chf.OpTopUp {
		// Key is the operator's idempotency key: the ABM credits a
		// repeat once (chf.ChargeRequest.Repeatable).
		ar.TopUp, ar.Key, ar.Digest = req.TopUp, req.Key, req.Digest()
		return
	}
	ar.Key, ar.Digest = req.Key, req.Digest()
	for i := range req.Lines {
		in := &req.Lines[i]
		out := chf.RatedLine{RatingGroup: in.RatingGroup, Offline: in.Offline}
		r := rate(t, in.RatingGroup)
		if r == nil {
			out.Result = chf.ResultRatingFailed
			ar.Lines = append(ar.Lines, out)
			continue
		}
		svc := r.ServiceOf()
		out.Service, out.Price, out.UnitSize = svc, r.Price, r.UnitSize()
		out.ValidityTime, out.QuotaHoldingTime = uint32(r.ValidityTime), uint32(r.QuotaHoldingTime)
		switch req.Op {
		case chf.OpEvent:
			// One-time event: charge the used units, else the requested
			// ones, else the default grant (one message), at once: after
			// delivery (PEC) or before it (IEC), see chf.EventType. The
			// cap (maxGrant) applies to what an IEC requests; what a PEC
			// names was delivered and is charged whole.
			out.AfterDelivery = req.Event.AfterDelivery(in)
			n := in.Used.Amount(svc)
			if n == 0 {
				n = in.Requested.Amount(svc)
				if !out.AfterDelivery || n == 0 {
					n = r.Grant(n)
				}
			}
			rateUsed(&out, r, n)
			out.ValidityTime, out.QuotaHoldingTime = 0, 0
		default:
			rateUsed(&out, r, in.Used.Amount(svc))
			// A report naming FINAL closes the rating group: no grant.
			// A line reported OFFLINE_CHARGING keeps its request: the ABM
			// grants it only when the session holds an online grant for
			// the rating group (charged by the grant's method), never
			// for offline usage.
			if in.Request && req.Op != chf.OpRelease && in.Reported&chf.TriggerFinal == 0 {
				out.Request = true
				out.GrantUnits = r.Grant(in.Requested.Amount(svc))
			}
		}
		ar.Lines = append(ar.Lines, out)
	}
}
