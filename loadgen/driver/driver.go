// Package driver is the boundary between the load engine and the
// protocols: the engine describes each transaction as a protocol-neutral
// Charge and receives a protocol-neutral Outcome; a Driver (package
// loadgen/driver/nchf for Nchf over HTTP/2 or HTTP/1.1, loadgen/driver/gy
// for Diameter Gy) owns everything about the wire: paths, bodies, CCRs,
// status and result-code classification, connections.
//
// The engine sees one execution model: each of its scheduler goroutines
// owns a Worker (Driver.NewWorker), queues charges on it, flushes them,
// and calls Poll, which waits for and handles network events and runs the
// done callbacks on the calling goroutine. The h2c event loop implements
// Worker natively; transports whose requests block a goroutine are
// adapted by Pool (a bounded set of goroutines feeding a completion
// channel that Poll drains).
package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chf"
)

// Errors a done callback or Queue returns, wrapped.
var (
	ErrTimeout    = errors.New("driver: timeout")
	ErrConnection = errors.New("driver: connection failed")
	ErrProto      = errors.New("driver: unknown protocol")
	ErrClosed     = errors.New("driver: worker closed")
)

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
// protocol. It is owned by the caller; a driver reads it only during
// Worker.Queue (it copies what it needs).
type Charge struct {
	Op ChargeOp
	// Target is the index of the target (or Gy peer) to send to, modulo
	// Driver.Targets.
	Target int
	// Flow identifies the flow (session, event or inquiry) among the
	// run's: the same on every request of a flow and on a
	// retransmission. Gy derives the Session-Id of a create, event or
	// inquiry from it, so that a retransmitted one repeats it.
	Flow uint64
	// SUPI is the subscriber, "imsi-<digits>" (or "msisdn-<digits>").
	SUPI []byte
	// Session is the reference a create returned (Outcome.Ref); used by
	// update and release.
	Session []byte
	// Seq is the invocation sequence number: numbers the requests of a
	// session from 0 (the create); Gy's CC-Request-Number.
	Seq         uint32
	RatingGroup uint32
	// Request asks for quota (Requested; empty = the CHF picks).
	Request   bool
	Requested chf.Units
	// Used is the usage reported, when not zero.
	Used chf.Units
	// Invoked is the invocation timestamp; identical on a retransmission.
	Invoked time.Time
	// Retransmit sets the protocol's retransmission flag (Nchf
	// retransmissionIndicator, Gy T flag).
	Retransmit bool
	// Retry marks a retry of a request that got no definitive answer or
	// was shed (the engine's retries, same identity as the first
	// attempt). A driver whose protocol identifies the request without
	// ambiguity may flag it whatever Retransmit says: Gy sets the T flag
	// on every retry, its Session-Id naming the flow (RFC 4006 8.1).
	Retry bool
	// Offline marks the usage reported as offline charging (Nchf
	// quotaManagementIndicator OFFLINE_CHARGING in the used unit
	// container): rated and recorded, not debited. Gy has no such mark.
	Offline bool
	// Reauthorized marks an update answering the CHF's re-authorisation
	// (Nchf usedUnitContainer trigger FORCED_REAUTHORISATION, Gy
	// Reporting-Reason FORCED_REAUTHORISATION).
	Reauthorized bool
	// WantGrant asks the driver to fill Outcome.Grant from the answer
	// (threshold-driven sessions); off, it is not parsed.
	WantGrant bool
}

// Grant is the quota an answer granted the charge's rating group, with
// the reporting triggers armed on it.
type Grant struct {
	// Has is set when the answer carried a grant.
	Has     bool
	Granted chf.Units
	// Threshold is the remaining-quota threshold in the grant's base unit
	// (Nchf volume/time/unitQuotaThreshold, Gy *-Quota-Threshold): usage
	// is reported when only this much is left; 0 = none.
	Threshold uint64
	// Validity is the grant's validity time in seconds (0 = none).
	Validity uint32
}

// Outcome is what a driver reports about one Charge. Ref is reused across
// requests: the driver truncates and appends.
type Outcome struct {
	// Class names why the transaction failed ("timeout", "connection",
	// "http_404", "rg_4012", "gy_5030", "no_location", ...); "" = success.
	Class string
	// Ref is the session reference a create returned (Nchf
	// ChargingDataRef, Gy Session-Id); empty when no session exists.
	Ref []byte
	// Charged is what the CHF reported charging (X-Chf-Charged, Gy
	// Cost-Information); HasCharged tells whether it reported it.
	Charged    int64
	HasCharged bool
	// Resolved is set when the CHF answered definitively: the charge is
	// known applied as answered, or refused. False for timeouts,
	// connection failures and server errors.
	Resolved bool
	// Gone is set when the session no longer exists: the flow ends.
	Gone bool
	// Shed is set when the CHF refused the request for overload (Nchf
	// 503, Gy 3004 DIAMETER_TOO_BUSY): not admitted.
	Shed bool
	// Barred is set when the CHF refused the request the way a barred
	// account is refused (Nchf 403 END_USER_REQUEST_DENIED, Gy 4010
	// DIAMETER_END_USER_SERVICE_DENIED, answer-wide or as the first
	// failed MSCC's code): the engine counts such a refusal during an
	// abort's bar as barred, not failed.
	Barred bool
	// RatingGroupRefused is set when the CHF answered the request as a
	// whole but refused a rating group in it (Nchf multipleUnitInformation
	// resultCode, Gy MSCC Result-Code): Class names that refusal ("rg_…"),
	// and the answer still reports what it charged.
	RatingGroupRefused bool
	// RetryAfter is how long the CHF asked the client to wait before
	// sending the request again (Nchf Retry-After on a 503); 0 when it
	// did not say.
	RetryAfter time.Duration
	// Received is when the answer arrived (the kernel's stamp where the
	// transport has it); zero when unknown.
	Received time.Time
	// Grant is the quota granted, filled when Charge.WantGrant.
	Grant Grant
}

// Reset clears o, keeping its buffer.
func (o *Outcome) Reset() {
	*o = Outcome{Ref: o.Ref[:0]}
}

// Fail fills o for a request that got no answer: err wraps ErrTimeout or
// ErrConnection.
func (o *Outcome) Fail(err error) {
	o.Reset()
	o.Class = ClassConnection
	if errors.Is(err, ErrTimeout) {
		o.Class = ClassTimeout
	}
}

// Error classes of requests without an answer.
const (
	ClassTimeout    = "timeout"
	ClassConnection = "connection"
)

// Driver creates workers over one protocol's connections to its targets.
// It is safe for concurrent use.
type Driver interface {
	// NewWorker returns an endpoint for one goroutine.
	NewWorker() (Worker, error)
	// Targets returns the number of targets (Charge.Target's range).
	Targets() int
	// Close releases the driver's shared resources; workers must be
	// closed first.
	Close()
}

// Worker is one goroutine's endpoint of a Driver: it is not safe for
// concurrent use. Every request is bounded by the driver's Config.Timeout:
// a request that gets no answer in time completes with an error wrapping
// ErrTimeout.
type Worker interface {
	// Queue starts c; the request may wait until Flush. done runs once,
	// inside a later Poll (or Close) on the calling goroutine, after o
	// is filled: with nil when an answer arrived (o.Class says whether it
	// was a success), or an error wrapping ErrTimeout or ErrConnection
	// (o filled by Outcome.Fail). done must not call back into the
	// Worker. An error returned by Queue means done will not be called.
	// o must not be touched until done runs.
	Queue(c *Charge, o *Outcome, done func(error)) error
	// Flush sends every queued request.
	Flush()
	// Poll handles what is ready and waits at most wait for more (wait
	// <= 0: only looks). It returns early after handling a completion,
	// except that a wait of at most SleepThrough may be slept through
	// in full and everything that arrived handled at its end: one
	// wake-up, the answers stamped with their arrival time anyway.
	Poll(wait time.Duration) error
	// Close abandons the requests in flight (their done callbacks are
	// not called) and releases the worker's connections.
	Close()
}

// SleepThrough is the longest Poll wait a Worker may sleep through
// without waking for completions.
const SleepThrough = time.Millisecond

// Config selects and tunes a driver.
type Config struct {
	Proto   string   // "h2c" (default), "h2c-async", "h2c-std", "http1" or "gy"
	Targets []string // host:port (the CGW's Nchf port, or its Diameter port for gy)
	// Conns is the number of connections per target (HTTP/2: streams are
	// multiplexed on them; HTTP/1.1: the pool size; gy: Diameter peers,
	// each its own Origin-Host). 0 = default.
	Conns int
	// Timeout bounds every wait: connecting and handshakes, and each
	// request. 0 = 2s.
	Timeout time.Duration
	// Blocking sends h2c through a goroutine per request in flight
	// (Pool) instead of the event loop, for comparison.
	Blocking bool
	// NFName is the nfConsumerIdentification.nFName sent by Nchf (an NF
	// instance UUID); empty picks a fixed one.
	NFName string
	// OnTime asks that waits end at the time asked, not the kernel's
	// wake-up delay later (the engine's Pacing 0): a worker that can may
	// wake early and spin the last µs, at some CPU. Without it a wait may
	// end that much late (paced runs wake on ticks anyway).
	OnTime bool
	// TLS, when set, sends over TLS (https:// targets) with this
	// configuration; the h2c event loop cannot, so h2c then runs as
	// h2c-async. Gy ignores it.
	TLS *tls.Config
	// NotifyListen, when set, is the host:port (port 0: any) on which the
	// Nchf driver serves the notifyUri its creates carry (HTTP/2
	// cleartext, "http://<listener address>/notify/<flow>"): the CHF's
	// ChargingNotify requests reach the flow they name (see
	// Notifiable). The host must be one the CHF can reach. Gy ignores it
	// (RAR and ASR come on the flow's peer connection).
	NotifyListen string
	// OperatorToken, when set, is sent by the Nchf driver as
	// "Authorization: Bearer <token>" on its balance inquiries (GET
	// /chf/v1/accounts/{supi}: the audit's reads and a scenario's
	// inquiries), which a CGW with an operator token guards with it; the
	// charging requests never carry it. It must be visible ASCII. Gy
	// ignores it.
	OperatorToken string
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 2 * time.Second

// ParseTargets splits "http://a:1,http://b:2" (or all https://) and
// checks every URL; the returned values are host:port. IsTLSTarget tells
// which scheme they use.
func ParseTargets(s string) ([]string, error) {
	if IsTLSTarget(s) {
		return parseTargets(s, "https", "want every target https:// or every one http://", false)
	}
	return parseTargets(s, "http", "want every target http:// or every one https://", false)
}

// IsTLSTarget reports whether a --target value names HTTPS endpoints.
func IsTLSTarget(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "https://")
}

// ParseDiameterTargets splits "diameter://a:3868,diameter://b:3868" (the
// scheme may be omitted) and checks every address; the returned values
// are host:port.
func ParseDiameterTargets(s string) ([]string, error) {
	return parseTargets(s, "diameter", "want diameter://HOST:PORT", true)
}

// IsDiameterTarget reports whether a --target value names Diameter peers.
func IsDiameterTarget(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "diameter://")
}

// parseTargets splits a comma list of scheme://HOST:PORT (the scheme may
// be omitted) and returns the host:port of each; wrong says what to use
// instead when a target has another scheme; needHost refuses an empty
// host.
func parseTargets(s, scheme, wrong string, needHost bool) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !strings.Contains(t, "://") {
			t = scheme + "://" + t
		}
		u, err := url.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("cannot parse target %q: %w", t, err)
		}
		if u.Scheme != scheme {
			return nil, fmt.Errorf("cannot use target %q: %s", t, wrong)
		}
		switch {
		case needHost && (u.Port() == "" || u.Hostname() == ""):
			return nil, fmt.Errorf("cannot use target %q: host or port missing", t)
		case u.Port() == "":
			return nil, fmt.Errorf("cannot use target %q: port missing", t)
		}
		out = append(out, u.Host)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cannot use targets %q: none given", s)
	}
	return out, nil
}

// Classify wraps a transport error as ErrTimeout or ErrConnection (nil
// stays nil; an error that already wraps one of them is returned as is).
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrTimeout) || errors.Is(err, ErrConnection) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "timeout") {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %v", ErrConnection, err)
}
