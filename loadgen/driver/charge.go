package driver

import "github.com/chf-testbed/testbed/chf"

// ChargeOp is the kind of a protocol-neutral charging transaction.
type ChargeOp uint8

// Charging transactions, in the load engine's operation order.
const (
	ChargeCreate  ChargeOp = iota // session start (Nchf create, Gy CCR INITIAL)
	ChargeUpdate                  // Nchf update, Gy CCR UPDATE
	ChargeRelease                 // Nchf release, Gy CCR TERMINATION
	ChargeEvent                   // one-time event (SMS): Gy CCR EVENT DIRECT_DEBITING
	ChargeBalance                 // balance inquiry: Gy CCR EVENT CHECK_BALANCE
)

// Charge describes one charging transaction independently of the
// protocol, for drivers that do not send Nchf over HTTP (see Charging).
// It is owned by the caller; a driver reads it only during Do or Start.
type Charge struct {
	Op ChargeOp
	// SUPI is the subscriber, "imsi-<digits>" (or "msisdn-<digits>").
	SUPI []byte
	// Session is what the create's Response.Location returned (the
	// session reference); used by update and release.
	Session []byte
	// Seq numbers the requests of a session from 0 (the create): Gy's
	// CC-Request-Number.
	Seq         uint32
	RatingGroup uint32
	// Request asks for quota (Requested, empty = the CHF picks).
	Request   bool
	Requested chf.Units
	// Used is the usage reported, when not zero.
	Used chf.Units
}

// Charging is implemented by drivers that send Request.Charge instead of
// an HTTP request (Method, Path and Body are ignored). Such a driver
// fills Response.Status with the HTTP status the Nchf equivalent would
// have had on success (201 create and event, 200 update and balance, 204
// release), Response.Location with the session reference on a create,
// Response.Charged from the protocol's charged amount, and
// Response.Class when the answer is a failure.
type Charging interface {
	Driver
	// Charging marks the driver; it does nothing.
	Charging()
}
