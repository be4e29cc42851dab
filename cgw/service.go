package cgw

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path"
	rpprof "runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/oauth2"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/service"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
)

// About is the help text of the cgw command.
const About = "Runs the Charging Gateway."

// ServiceConfig is the configuration of the cgw command (`chf cgw`): one
// field per flag. Start from DefaultServiceConfig.
type ServiceConfig struct {
	service.Base
	OCP                     peer.Flags
	Batch                   batcher.Config
	Diameter                string
	OriginHost, OriginRealm string
	// AllowHosts and AllowRealms are comma-separated path.Match patterns.
	AllowHosts, AllowRealms string
	MaxBody, MaxInFlight    int
	// Admission is "adaptive" (package admission's concurrency limit
	// driven by the queueing delay, under MaxInFlight) or "fixed"
	// (MaxInFlight only); AdmissionTarget, AdmissionInterval and
	// AdmissionTolerance are its Config.Target, Interval (0 = at the first
	// window above) and Tolerance.
	Admission                          string
	AdmissionTarget, AdmissionInterval time.Duration
	AdmissionTolerance                 float64
	CPUProfile                         string
	// TLS of the Nchf front (--tls-*) and of the calls to the OCP
	// (--peer-tls).
	TLS tlsconfig.Config
	// OAuth2Keys is the file of the public keys that sign access tokens;
	// empty = no token check. OAuth2Audience, when set, must be in aud.
	OAuth2Keys, OAuth2Audience string
	// OperatorTokenFile holds the bearer token of the operator API.
	OperatorTokenFile string
	// NotifyPoll is how often the CGW takes the re-authorisations the
	// ABM's sweep queued (0 = never).
	NotifyPoll time.Duration
	// Advertise is the apiRoot of the Location header (empty: from the
	// listener, https with TLS).
	Advertise string
}

// DefaultServiceConfig returns the defaults of the cgw flags.
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{
		Base:        service.Base{Listen: "127.0.0.1:8080", Tracing: true},
		OCP:         peer.Flags{Name: "ocp", Addr: "127.0.0.1:8081", Discovery: "static"},
		Batch:       batcher.Config{MaxInFlight: batcher.DefaultInFlight, MaxItems: batcher.DefaultItems},
		OriginHost:  "cgw.chf.test",
		OriginRealm: "chf.test",
		MaxBody:     64 << 10,
		MaxInFlight: 4096,
		Admission:   "adaptive", AdmissionTarget: 5 * time.Millisecond, AdmissionInterval: 200 * time.Millisecond, AdmissionTolerance: 2,
		NotifyPoll: time.Second,
		TLS:        tlsconfig.Default(),
	}
}

// RegisterFlags registers the cgw flags, c's values as defaults.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "host:port for Nchf_ConvergedCharging over HTTP/2 cleartext (prior knowledge) and HTTP/1.1 on one port, plus the balance inquiry GET /chf/v1/accounts/{supi}, /healthz, /readyz and /metrics")
	c.OCP.RegisterFlags(fs)
	rpc.RegisterBatchFlags(fs, &c.Batch, "ocp")
	fs.StringVar(&c.Diameter, "diameter", c.Diameter, "host:port to serve Diameter Gy (RFC 4006 credit control) on; empty = off")
	fs.StringVar(&c.OriginHost, "diameter-origin-host", c.OriginHost, "Diameter Origin-Host of the CGW")
	fs.StringVar(&c.OriginRealm, "diameter-origin-realm", c.OriginRealm, "Diameter Origin-Realm of the CGW")
	fs.StringVar(&c.AllowHosts, "diameter-allow-host", c.AllowHosts,
		"comma-separated Origin-Host patterns (path.Match: *.pgw.example) of the Diameter peers allowed to connect; others get DIAMETER_UNKNOWN_PEER at CER and are closed; empty = any host")
	fs.StringVar(&c.AllowRealms, "diameter-allow-realm", c.AllowRealms,
		"comma-separated Origin-Realm patterns (path.Match) of the Diameter peers allowed to connect; a peer must match both lists; empty = any realm")
	fs.IntVar(&c.MaxBody, "max-body", c.MaxBody, "largest Nchf request body in bytes; larger ones get 413 ProblemDetails")
	fs.IntVar(&c.MaxInFlight, "max-inflight", c.MaxInFlight, "Nchf requests charged at once; beyond it requests get 503 (NF_CONGESTION) at once instead of queueing")
	fs.StringVar(&c.Admission, "admission", c.Admission, "how Nchf and Gy requests are admitted under overload: adaptive (a concurrency limit that shrinks when requests queue behind the charging core, i.e. when the 10th percentile latency of each 100 ms window stays above --admission-target for --admission-interval, so excess load is shed with 503 NF_CONGESTION + Retry-After / Gy 3004 instead of queueing; bounded by --max-inflight) or fixed (--max-inflight only)")
	fs.DurationVar(&c.AdmissionTarget, "admission-target", c.AdmissionTarget, "with --admission adaptive, the queueing delay (10th percentile latency of a 100 ms window) above which the limit shrinks; under overload admitted requests take about this plus the core's own spread; > 0, at most 10s")
	fs.DurationVar(&c.AdmissionInterval, "admission-interval", c.AdmissionInterval, "with --admission adaptive, how long the delay must stay above --admission-target before the limit shrinks (shorter bursts, a stall or a GC pause, shed nothing); 0 = at the first window above; at most 10s")
	fs.Float64Var(&c.AdmissionTolerance, "admission-tolerance", c.AdmissionTolerance, "with --admission adaptive, the threshold is at least this many times the lowest delay seen (for a core whose unloaded latency is above --admission-target), >= 1")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile of the whole run to this file (stopped at exit)")
	c.TLS.RegisterFlags(fs, "OCP")
	fs.StringVar(&c.OAuth2Keys, "oauth2-keys", c.OAuth2Keys,
		"file of the public keys (PEM keys or certificates, or a JWKS) that sign OAuth2 access tokens (TS 33.501): every Nchf and balance request then needs Authorization: Bearer <JWT> with scope "+oauth2.ScopeConvergedCharging+" (401/403 otherwise); empty = no token check")
	fs.StringVar(&c.OAuth2Audience, "oauth2-audience", c.OAuth2Audience, "with --oauth2-keys: a value the token's aud must contain (this NF's instance ID or type); empty = aud not checked")
	fs.DurationVar(&c.NotifyPoll, "notify-poll", c.NotifyPoll, "how often to take the re-authorisations the ABM's reservation sweep queued (sessions granted under an older tariff, or holding units of an expired bucket) and send each a ChargingNotify REAUTHORIZATION (Gy: RAR); a full answer is followed by the next poll at once; 0 = never")
	fs.StringVar(&c.OperatorTokenFile, "operator-token-file", c.OperatorTokenFile,
		"file holding the bearer token the operator API (POST /chf/v1/accounts/{supi}/topup, /reauthorize, /abort, /unbar) and, when set, the balance inquiry GET /chf/v1/accounts/{supi} require (surrounding white space ignored); without it the operator API answers 403 when --listen is beyond loopback and is open on loopback, and the balance inquiry is open")
	fs.StringVar(&c.Advertise, "advertise", c.Advertise,
		"the apiRoot clients reach this CGW at, scheme://host[:port][/prefix] (e.g. https://cgw.chf.svc:8080): a create's Location is <advertise>/nchf-convergedcharging/v3/chargingdata/{ref}, never built from the request's Host; empty = http://<--listen> (https:// with --tls-cert), an unspecified listen host (0.0.0.0, ::) replaced by the machine's host name")
}

// operatorToken reads --operator-token-file ("" when unset) and reports
// whether the API may be open without a token (loopback listener).
func (c *ServiceConfig) operatorToken() (token string, open bool, err error) {
	open = loopbackOnly(c.Listen)
	if c.OperatorTokenFile == "" {
		// Beyond loopback the API then answers 403.
		return "", open, nil
	}
	b, err := readfile.Read(c.OperatorTokenFile, readfile.MaxSecretBytes)
	if err != nil {
		return "", false, fmt.Errorf("cannot read --operator-token-file: %w", err)
	}
	token = strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", false, fmt.Errorf("cannot use --operator-token-file %s: the token must be at least 16 characters", c.OperatorTokenFile)
	}
	return token, false, nil
}

// loopbackOnly reports whether a listen address binds loopback only.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MaxBodyLimit and MaxInFlightLimit bound --max-body (an Nchf request is
// a few KiB) and --max-inflight.
const (
	MaxBodyLimit     = 16 << 20
	MaxInFlightLimit = 1 << 20
)

// Validate checks the flags' values.
func (c *ServiceConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if c.Advertise != "" {
		if err := ValidateAdvertise(c.Advertise); err != nil {
			return err
		}
	}
	if c.NotifyPoll < 0 {
		return fmt.Errorf("cannot use --notify-poll %v: must not be negative (0 = never)", c.NotifyPoll)
	}
	if c.MaxBody <= 0 || c.MaxBody > MaxBodyLimit {
		// The fronts buffer up to four times it per request.
		return fmt.Errorf("cannot use --max-body %d: want 1..%d", c.MaxBody, MaxBodyLimit)
	}
	if c.MaxInFlight <= 0 || c.MaxInFlight > MaxInFlightLimit {
		return fmt.Errorf("cannot use --max-inflight %d: want 1..%d", c.MaxInFlight, MaxInFlightLimit)
	}
	if c.Admission != "adaptive" && c.Admission != "fixed" {
		return fmt.Errorf("cannot use --admission %q: want adaptive or fixed", c.Admission)
	}
	if c.AdmissionTarget <= 0 || c.AdmissionTarget > 10*time.Second {
		return fmt.Errorf("cannot use --admission-target %s: must be above 0 and at most 10s", c.AdmissionTarget)
	}
	if c.AdmissionInterval < 0 || c.AdmissionInterval > 10*time.Second {
		return fmt.Errorf("cannot use --admission-interval %s: must be from 0 to 10s", c.AdmissionInterval)
	}
	if !(c.AdmissionTolerance >= 1) || math.IsInf(c.AdmissionTolerance, 0) {
		return fmt.Errorf("cannot use --admission-tolerance %g: must be a number of at least 1", c.AdmissionTolerance)
	}
	if c.Diameter != "" {
		if _, _, err := net.SplitHostPort(c.Diameter); err != nil {
			return fmt.Errorf("cannot parse --diameter %q: %w", c.Diameter, err)
		}
	}
	for _, p := range append(splitList(c.AllowHosts), splitList(c.AllowRealms)...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("cannot use --diameter-allow-host/--diameter-allow-realm pattern %q: %w", p, err)
		}
	}
	if _, err := c.OCP.Source(); err != nil {
		return err
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.OAuth2Keys != "" {
		if _, err := oauth2.LoadFile(c.OAuth2Keys, oauth2.Options{}); err != nil {
			return fmt.Errorf("cannot use --oauth2-keys: %w", err)
		}
	} else if c.OAuth2Audience != "" {
		return errors.New("cannot use --oauth2-audience without --oauth2-keys")
	}
	if _, _, err := c.operatorToken(); err != nil {
		return err
	}
	return rpc.ValidateBatch(c.Batch)
}

// String is the configuration as name=value pairs of its flags.
func (c ServiceConfig) String() string { return service.ConfigString(&c) }

// Common implements service.Config.
func (c *ServiceConfig) Common() *service.Base { return &c.Base }

// AddTo adds the CGW's components to g: the CPU profile, the OCP client,
// the Nchf server and the Diameter server (when --diameter is set).
func (c *ServiceConfig) AddTo(g *service.Group, log *slog.Logger) error {
	if c.CPUProfile != "" {
		var pf *os.File
		g.Add("cpu profile", func() error {
			var err error
			if pf, err = os.Create(c.CPUProfile); err != nil {
				return fmt.Errorf("cannot create --cpuprofile: %w", err)
			}
			if err := rpprof.StartCPUProfile(pf); err != nil {
				pf.Close()
				return fmt.Errorf("cannot start CPU profile: %w", err)
			}
			return nil
		}, func(context.Context) error { rpprof.StopCPUProfile(); return pf.Close() })
	}
	files, err := c.TLS.AddTo(g, log)
	if err != nil {
		return err
	}
	var tokens *oauth2.Verifier
	if c.OAuth2Keys != "" {
		if tokens, err = oauth2.LoadFile(c.OAuth2Keys, oauth2.Options{Audience: c.OAuth2Audience}); err != nil {
			return fmt.Errorf("cannot use --oauth2-keys: %w", err)
		}
		tokens.SetLogger(log)
		var stop func()
		g.Add("OAuth2 key reload on SIGHUP", func() error { stop = tokens.ReloadOnSIGHUP(); return nil },
			func(context.Context) error { stop(); return nil })
	}
	peerTLS := c.TLS.Client(files)
	var client *peer.Client
	var charger *ocpclient.Client
	g.Add("OCP client", func() error {
		src, err := c.OCP.Source()
		if err != nil {
			return err
		}
		// A round trip whose requests all carry an identity the ABM
		// keeps (chf.ChargeRequest.Repeatable) is retried on another OCP
		// after a failure that may have reached the first (an OCP killed
		// mid-call, 502/503/504), within the request's deadline: the ABM
		// answers the repeat as the first (Replayed, with its charge),
		// charging once. A burst of up to retryBurst retries (the round
		// trips in flight to an instance that dies), then 10% of calls.
		if client, err = peer.New(peer.Config{Peer: "ocp", Source: src, TLS: peerTLS, Logger: log,
			Retry: peer.RetryConfig{MinBudget: retryBurst}}); err != nil {
			return fmt.Errorf("cannot create OCP client: %w", err)
		}
		charger = ocpclient.New(client, c.Batch)
		return nil
	}, func(context.Context) error { client.Close(); return nil })
	var lim *admission.Limiter
	if c.Admission == "adaptive" {
		interval := c.AdmissionInterval
		if interval == 0 {
			interval = -1 // at the first window above
		}
		lim = admission.New(admission.Config{MaxLimit: c.MaxInFlight, InitialLimit: c.MaxInFlight / 4,
			Target: c.AdmissionTarget, Interval: interval, Tolerance: c.AdmissionTolerance})
	}
	var srv *Server
	var notifier *Notifier
	gy := &lateGy{}
	g.Add("CGW server", func() error {
		token, open, err := c.operatorToken()
		if err != nil {
			return err
		}
		notifier = NewNotifier(NotifierConfig{})
		srv, err = NewServer(Config{
			Listen: c.Listen,
			Handler: HandlerConfig{Charger: charger, MaxBody: c.MaxBody, MaxInFlight: c.MaxInFlight, Limiter: lim, Logger: log,
				OperatorToken: token, OperatorOpen: open, Notifier: notifier, Gy: gy},
			Ready:     peerReady(client, peerTLS),
			TLS:       c.TLS.Server(files, "h2", "http/1.1"),
			Tokens:    tokens,
			Advertise: c.Advertise,
			Logger:    log,
		})
		if err != nil {
			return fmt.Errorf("cannot create CGW server: %w", err)
		}
		return srv.Start()
	}, func(ctx context.Context) error { err := srv.Shutdown(ctx); notifier.Close(); return err })
	if c.NotifyPoll > 0 {
		g.Background("notification poller", func(ctx context.Context) { srv.Handler().PollNotifications(ctx, c.NotifyPoll) })
	}
	if c.Diameter != "" {
		var dia *diameter.Server
		g.Add("Diameter server", func() error {
			var err error
			dia, err = diameter.NewServer(diameter.Config{
				OriginHost: c.OriginHost, OriginRealm: c.OriginRealm, MaxInFlight: c.MaxInFlight, Limiter: lim, Logger: log,
				AllowHosts: splitList(c.AllowHosts), AllowRealms: splitList(c.AllowRealms),
			}, charger)
			if err != nil {
				return fmt.Errorf("cannot create Diameter server: %w", err)
			}
			if err := dia.RegisterMetrics(telemetry.Meter()); err != nil {
				return err
			}
			if err := dia.Listen(c.Diameter); err != nil {
				return err
			}
			gy.s.Store(dia)
			log.Info("serving Diameter Gy", "addr", dia.Addr())
			return nil
		}, func(ctx context.Context) error { return dia.Shutdown(ctx) })
	}
	return nil
}

// lateGy is the Diameter server as the handler's GyNotifier: it starts
// after the HTTP server.
type lateGy struct {
	s atomic.Pointer[diameter.Server]
}

func (g *lateGy) Notify(ctx context.Context, host, sid string, abort bool) error {
	s := g.s.Load()
	if s == nil {
		return diameter.ErrPeerGone
	}
	return s.Notify(ctx, host, sid, abort)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// peerReady reports ready once one OCP endpoint answers its /readyz.
func peerReady(c *peer.Client, tlsCfg *tls.Config) func(ctx context.Context) error {
	scheme, hc := "http://", &fasthttp.Client{}
	if tlsCfg != nil {
		scheme, hc.TLSConfig = "https://", tlsCfg
	}
	return func(ctx context.Context) error {
		eps := c.Endpoints()
		if len(eps) == 0 {
			return errors.New("no OCP endpoint known")
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(2 * time.Second)
		}
		var last error
		for _, ep := range eps {
			status, _, err := hc.GetDeadline(nil, scheme+ep+"/readyz", deadline)
			if err == nil && status == fasthttp.StatusOK {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("OCP %s /readyz answered %d", ep, status)
			}
			last = err
		}
		return last
	}
}

// retryBurst is the retry budget of the OCP client at rest: enough for the
// round trips in flight to one OCP when it dies.
const retryBurst = 100
