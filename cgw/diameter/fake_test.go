package diameter

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/chf-testbed/testbed/chf"
)

// fakeRate mirrors the default tariff of ocp: data per MB, voice per
// second, SMS per event, ceil(n*price/unit).
type fakeRate struct {
	svc          chf.Service
	price        int64
	unit         uint64
	defaultGrant uint64
}

var fakeRates = map[uint32]fakeRate{
	10: {chf.ServiceData, 1, 1_000_000, 10_000_000},
	20: {chf.ServiceVoice, 1, 1, 300},
	30: {chf.ServiceSMS, 5, 1, 1},
}

func (r fakeRate) cost(n uint64) int64 {
	return int64((n*uint64(r.price) + r.unit - 1) / r.unit)
}

func (r fakeRate) amount(u chf.Units) uint64 {
	switch r.svc {
	case chf.ServiceData:
		if u.TotalVolume != 0 {
			return u.TotalVolume
		}
		return u.UplinkVolume + u.DownlinkVolume
	case chf.ServiceVoice:
		return uint64(u.Time)
	}
	return u.ServiceSpecific
}

func (r fakeRate) units(n uint64) chf.Units {
	switch r.svc {
	case chf.ServiceData:
		return chf.Units{TotalVolume: n}
	case chf.ServiceVoice:
		return chf.Units{Time: uint32(n)}
	}
	return chf.Units{ServiceSpecific: n}
}

type fakeAccount struct{ balance, reserved int64 }

type fakeSession struct {
	seq    uint32
	last   chf.ChargeResponse
	res    map[uint32]int64
	closed bool
}

// fakeCharger is an in-memory charging core with honest balance math:
// used units are debited at the tariff, grants reserve their cost,
// repeated Seq answers the stored answer and charges nothing.
type fakeCharger struct {
	mu    sync.Mutex
	acc   map[string]*fakeAccount
	sess  map[string]*fakeSession
	block chan struct{} // when set, Charge waits for it to be closed
	err   error
	calls atomic.Int64
}

func newFakeCharger() *fakeCharger {
	return &fakeCharger{acc: map[string]*fakeAccount{}, sess: map[string]*fakeSession{}}
}

func (f *fakeCharger) add(supi string, balance int64) {
	f.mu.Lock()
	f.acc[supi] = &fakeAccount{balance: balance}
	f.mu.Unlock()
}

func (f *fakeCharger) account(supi string) fakeAccount {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.acc[supi]; a != nil {
		return *a
	}
	return fakeAccount{}
}

func (f *fakeCharger) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.err != nil {
		return f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lines := resp.Lines[:0]
	*resp = chf.ChargeResponse{Lines: lines, Currency: "EUR"}
	a := f.acc[req.SUPI]
	if a == nil {
		resp.Result = chf.ResultUserUnknown
		return nil
	}
	defer func() { resp.Balance, resp.Reserved = a.balance, a.reserved }()
	if req.Op == chf.OpBalance {
		return nil
	}
	key := req.SUPI + "|" + req.Session
	s := f.sess[key]
	if s != nil {
		switch {
		case req.Seq == s.seq:
			*resp = s.last
			resp.Lines = append(lines, s.last.Lines...)
			resp.Charged = 0
			return nil
		case req.Seq < s.seq:
			resp.Result = chf.ResultStaleSequence
			return nil
		}
	}
	switch req.Op {
	case chf.OpCreate, chf.OpEvent:
		if s == nil {
			s = &fakeSession{res: map[uint32]int64{}}
			f.sess[key] = s
		}
	default:
		if s == nil || s.closed {
			resp.Result = chf.ResultSessionUnknown
			return nil
		}
	}
	quotaFailed := 0
	for _, in := range req.Lines {
		out := chf.GrantLine{RatingGroup: in.RatingGroup}
		r, ok := fakeRates[in.RatingGroup]
		if !ok {
			out.Result = chf.ResultRatingFailed
			resp.Lines = append(resp.Lines, out)
			continue
		}
		if req.Op == chf.OpEvent {
			n := r.amount(in.Used)
			if n == 0 {
				n = r.amount(in.Requested)
			}
			if n == 0 {
				n = r.defaultGrant
			}
			c := r.cost(n)
			if a.balance-a.reserved < c {
				out.Result = chf.ResultQuotaLimitReached
				quotaFailed++
			} else {
				a.balance -= c
				resp.Charged += c
				out.Granted = r.units(n)
			}
			resp.Lines = append(resp.Lines, out)
			continue
		}
		c := r.cost(r.amount(in.Used))
		a.balance -= c
		resp.Charged += c
		a.reserved -= s.res[in.RatingGroup]
		s.res[in.RatingGroup] = 0
		if in.Request && req.Op != chf.OpRelease {
			n := r.amount(in.Requested)
			if n == 0 {
				n = r.defaultGrant
			}
			gc := r.cost(n)
			if avail := a.balance - a.reserved; avail < gc || avail <= 0 {
				out.Result = chf.ResultQuotaLimitReached
				quotaFailed++
			} else {
				a.reserved += gc
				s.res[in.RatingGroup] = gc
				out.Granted = r.units(n)
				out.ValidityTime, out.QuotaHoldingTime = 1800, 300
				out.FinalUnit = a.balance-a.reserved < gc
			}
		}
		resp.Lines = append(resp.Lines, out)
	}
	if req.Op == chf.OpRelease {
		for rg, v := range s.res {
			a.reserved -= v
			delete(s.res, rg)
		}
		s.closed = true
	}
	if quotaFailed > 0 && quotaFailed == len(req.Lines) {
		resp.Result = chf.ResultQuotaLimitReached
	}
	s.seq = req.Seq
	s.last = *resp
	s.last.Lines = append([]chf.GrantLine(nil), resp.Lines...)
	s.last.Balance, s.last.Reserved = a.balance, a.reserved
	return nil
}
