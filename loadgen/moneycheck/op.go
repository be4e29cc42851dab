package moneycheck

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is the kind of an operation.
type Kind uint8

// Operations the checker sends.
const (
	KindCreate  Kind = iota + 1 // Nchf create (session charging)
	KindUpdate                  // Nchf update
	KindRelease                 // Nchf release
	KindEvent                   // Nchf create with oneTimeEvent (event charging)
	KindTopUp                   // operator top-up (money and/or a bucket)
	KindBalance                 // balance inquiry
	KindAbort                   // operator abort (bars the account and its sessions)
	KindUnbar                   // operator unbar
)

var kindNames = [...]string{"?", "create", "update", "release", "event", "topup", "balance", "abort", "unbar"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Line is one multipleUnitUsage entry of a request.
type Line struct {
	RG        uint32
	Request   bool   // requestedUnit present
	Requested uint64 // units requested; 0 = the default grant
	Used      uint64 // units reported used (one usedUnitContainer)
	Offline   bool   // the container says quotaManagementIndicator OFFLINE_CHARGING
	Final     bool   // the container names the FINAL trigger
}

// Bucket is a top-up's allowance (never expiring).
type Bucket struct {
	Service string
	Units   uint64
}

// Op is one request of the checker. Sending it again (a retransmission,
// a retry) repeats its identity: the same Seq and Stamp.
type Op struct {
	ID        int // its number in the account's history
	Kind      Kind
	Sess      int    // the local number of the session a create opens, or an update or release names
	Seq       uint32 // invocationSequenceNumber
	Stamp     int64  // invocationTimeStamp, nanoseconds after the run's base time
	Lines     []Line
	EventType string // an event's oneTimeEventType: IEC, PEC or none
	Amount    int64  // top-up money
	Bucket    *Bucket
	// Note says what the operation repeats ("retransmission of #12").
	Note string
	// Retrans sends retransmissionIndicator true from the first send.
	Retrans bool
}

func (o *Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", o.ID, o.Kind)
	switch o.Kind {
	case KindCreate, KindUpdate, KindRelease:
		fmt.Fprintf(&b, " s%d seq=%d", o.Sess, o.Seq)
	case KindEvent:
		fmt.Fprintf(&b, " seq=%d", o.Seq)
		if o.EventType != "" {
			b.WriteString(" " + o.EventType)
		}
	case KindTopUp:
		fmt.Fprintf(&b, " amount=%d", o.Amount)
		if o.Bucket != nil {
			fmt.Fprintf(&b, " bucket=%s:%d", o.Bucket.Service, o.Bucket.Units)
		}
	}
	if o.Kind == KindCreate || o.Kind == KindEvent {
		fmt.Fprintf(&b, " stamp=%d", o.Stamp)
	}
	for _, l := range o.Lines {
		fmt.Fprintf(&b, " [rg%d", l.RG)
		if l.Request {
			if l.Requested == 0 {
				b.WriteString(" req=default")
			} else {
				fmt.Fprintf(&b, " req=%d", l.Requested)
			}
		}
		if l.Used > 0 || !l.Request {
			fmt.Fprintf(&b, " used=%d", l.Used)
		}
		if l.Offline {
			b.WriteString(" OFFLINE")
		}
		if l.Final {
			b.WriteString(" FINAL")
		}
		b.WriteString("]")
	}
	if o.Retrans {
		b.WriteString(" retransmissionIndicator")
	}
	if o.Note != "" {
		b.WriteString(" (" + o.Note + ")")
	}
	return b.String()
}

// LineAnswer is one multipleUnitInformation entry of an answer.
type LineAnswer struct {
	RG     uint32
	Result string
	Units  uint64 // granted (or, for an event, charged) units
	Final  bool   // finalUnitIndication present
}

// BucketView is a service's allowance in the balance inquiry.
type BucketView struct{ Units, Held uint64 }

// AccountView is the balance inquiry's answer.
type AccountView struct {
	Balance, Reserved, Available, Debited, Overage, Offline, Credited, CreditLimit int64
	Barred                                                                         bool
	Buckets                                                                        [nsvc]BucketView
	// HeldElsewhere is held units reported on a bucket that is not the
	// first of its service (the model says 0).
	HeldElsewhere uint64
}

func (v AccountView) String() string {
	s := fmt.Sprintf("balance=%d reserved=%d available=%d debited=%d overage=%d offline=%d credited=%d creditLimit=%d",
		v.Balance, v.Reserved, v.Available, v.Debited, v.Overage, v.Offline, v.Credited, v.CreditLimit)
	if v.Barred {
		s += " barred"
	}
	for i, b := range v.Buckets {
		if b != (BucketView{}) {
			s += fmt.Sprintf(" %s=%d(held %d)", svcNames[i], b.Units, b.Held)
		}
	}
	if v.HeldElsewhere != 0 {
		s += fmt.Sprintf(" held-on-a-later-bucket=%d", v.HeldElsewhere)
	}
	return s
}

// Answer is what the CHF answered to an operation (observed) or must
// answer (predicted by the model).
type Answer struct {
	Status      int
	Cause       string // ProblemDetails cause
	Charged     int64  // X-Chf-Charged
	HasCharged  bool
	Ref         string // a create's ChargingDataRef (from Location)
	Lines       []LineAnswer
	Account     *AccountView // top-up, unbar, balance inquiry
	Sessions    int          // abort: the open sessions it listed
	HasSessions bool
	// InDoubt: no definite answer (a transport error, a timeout, a 5xx);
	// Err says why.
	InDoubt bool
	Err     string
	// Tries is how many times the request was sent.
	Tries int
}

func (a Answer) clone() Answer {
	a.Lines = slices.Clone(a.Lines)
	if a.Account != nil {
		v := *a.Account
		a.Account = &v
	}
	return a
}

// String is the answer as the history prints it.
func (a Answer) String() string {
	if a.InDoubt {
		return "in doubt: " + a.Err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d", a.Status)
	if a.Cause != "" {
		b.WriteString(" " + a.Cause)
	}
	if a.HasCharged {
		fmt.Fprintf(&b, " charged=%d", a.Charged)
	}
	if a.Ref != "" {
		b.WriteString(" ref=" + a.Ref)
	}
	for _, l := range a.Lines {
		fmt.Fprintf(&b, " [rg%d %s", l.RG, l.Result)
		if l.Units > 0 {
			fmt.Fprintf(&b, " %d", l.Units)
		}
		if l.Final {
			b.WriteString(" final")
		}
		b.WriteString("]")
	}
	if a.HasSessions {
		fmt.Fprintf(&b, " sessions=%d", a.Sessions)
	}
	if a.Account != nil {
		b.WriteString(" {" + a.Account.String() + "}")
	}
	return b.String()
}

// sameAnswer reports whether the observed answer obs is the predicted
// pred, and if not, how they differ. Charged is compared when the CHF
// sent it (and it must on every 2xx charging answer).
func sameAnswer(pred, obs *Answer) (bool, string) {
	if pred.Status != obs.Status {
		return false, fmt.Sprintf("status %d, want %d", obs.Status, pred.Status)
	}
	if pred.Cause != "" && obs.Cause != pred.Cause {
		return false, fmt.Sprintf("cause %q, want %q", obs.Cause, pred.Cause)
	}
	if obs.HasCharged && pred.HasCharged && obs.Charged != pred.Charged {
		return false, fmt.Sprintf("charged %d, want %d", obs.Charged, pred.Charged)
	}
	if pred.HasCharged && !obs.HasCharged && obs.Status/100 == 2 {
		return false, "no X-Chf-Charged header"
	}
	if pred.Ref != obs.Ref && pred.Status == statusCreated && pred.Ref != "" {
		return false, fmt.Sprintf("ref %s, want the first answer's %s", obs.Ref, pred.Ref)
	}
	if obs.Status == statusOK || obs.Status == statusCreated {
		if len(pred.Lines) != len(obs.Lines) {
			return false, fmt.Sprintf("%d result lines, want %d", len(obs.Lines), len(pred.Lines))
		}
		for i := range pred.Lines {
			if pred.Lines[i] != obs.Lines[i] {
				return false, fmt.Sprintf("line %d %+v, want %+v", i, obs.Lines[i], pred.Lines[i])
			}
		}
	}
	if pred.Account != nil {
		if obs.Account == nil {
			return false, "no account in the answer"
		}
		if *pred.Account != *obs.Account {
			return false, fmt.Sprintf("account {%s}, want {%s}", obs.Account, pred.Account)
		}
	}
	if pred.HasSessions && (!obs.HasSessions || obs.Sessions != pred.Sessions) {
		return false, fmt.Sprintf("sessions %d, want %d", obs.Sessions, pred.Sessions)
	}
	return true, ""
}
