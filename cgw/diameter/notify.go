package diameter

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
)

// NotifyPrefix starts the notify target a Gy session keeps in the account
// record: "diameter:" Origin-Host "\n" Session-Id.
const NotifyPrefix = "diameter:"

// ErrPeerGone is returned by Notify when the session's peer is not
// connected.
var ErrPeerGone = errors.New("diameter: the session's peer is not connected")

// AppendNotifyTarget appends the notify target of a Gy session.
func AppendNotifyTarget(dst, originHost, sessionID []byte) []byte {
	dst = append(dst, NotifyPrefix...)
	dst = append(dst, originHost...)
	dst = append(dst, '\n')
	return append(dst, sessionID...)
}

// ParseNotifyTarget splits a notify target made by AppendNotifyTarget.
func ParseNotifyTarget(t string) (originHost, sessionID string, ok bool) {
	rest, ok := bytes.CutPrefix([]byte(t), []byte(NotifyPrefix))
	if !ok {
		return "", "", false
	}
	h, sid, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || len(h) == 0 || len(sid) == 0 {
		return "", "", false
	}
	return string(h), string(sid), true
}

// Notify sends a Re-Auth-Request (abort false; Re-Auth-Request-Type
// AUTHORIZE_ONLY) or an Abort-Session-Request (abort true) for sessionID
// to the connected peer originHost and waits for its answer: nil when it
// answered DIAMETER_SUCCESS (or, to a RAR, LIMITED_SUCCESS).
func (s *Server) Notify(ctx context.Context, originHost, sessionID string, abort bool) error {
	var p *peer
	s.mu.Lock()
	for q := range s.peers {
		if q.host == originHost {
			p = q
			break
		}
	}
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("cannot notify session %s: %w (%s)", sessionID, ErrPeerGone, originHost)
	}
	code := uint32(diam.ReAuth)
	if abort {
		code = diam.AbortSession
	}
	hbh := s.hbh.Add(1)
	m := diam.NewMessage(code, diam.RequestFlag|diam.ProxiableFlag, wire.AppCreditControl, hbh, s.hbh.Add(1), dict.Default)
	m.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(sessionID))
	s.addIdentity(m)
	m.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity(p.realm))
	m.NewAVP(avp.DestinationHost, avp.Mbit, 0, datatype.DiameterIdentity(p.host))
	m.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(wire.AppCreditControl))
	if !abort {
		m.NewAVP(avp.ReAuthRequestType, avp.Mbit, 0, datatype.Enumerated(0)) // AUTHORIZE_ONLY
	}
	ch := make(chan uint32, 1)
	p.pmu.Lock()
	if p.pending == nil {
		p.pending = map[uint32]chan uint32{}
	}
	p.pending[hbh] = ch
	p.pmu.Unlock()
	defer func() {
		p.pmu.Lock()
		delete(p.pending, hbh)
		p.pmu.Unlock()
	}()
	p.writeMessage(m)
	select {
	case rc := <-ch:
		if rc == wire.ResultSuccess || rc == 2002 && !abort {
			return nil
		}
		return fmt.Errorf("cannot notify session %s: %s answered Result-Code %d", sessionID, originHost, rc)
	case <-p.done:
		return fmt.Errorf("cannot notify session %s: %w (%s)", sessionID, ErrPeerGone, originHost)
	case <-ctx.Done():
		return fmt.Errorf("cannot notify session %s: %w", sessionID, ctx.Err())
	}
}

// answered delivers a RAA's or ASA's Result-Code to the waiting Notify.
func (p *peer) answered(hbh uint32, msg []byte) {
	p.pmu.Lock()
	ch := p.pending[hbh]
	p.pmu.Unlock()
	if ch == nil {
		return
	}
	rc := uint32(0)
	it := wire.MessageIter(msg)
	var a wire.AVP
	for it.Next(&a) {
		if a.Code == wire.CodeResultCode && a.Vendor == 0 {
			rc, _ = wire.Uint32(a.Data)
		}
	}
	select {
	case ch <- rc:
	default:
	}
}
