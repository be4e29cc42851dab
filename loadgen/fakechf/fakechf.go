// Package fakechf is a small in-memory stand-in for the CHF's Nchf and
// account APIs, for the load generator's tests: it speaks HTTP/1.1 and
// HTTP/2 cleartext (prior knowledge) on one port, keeps balances and
// reservations, reports X-Chf-Charged, and can inject faults (latency,
// stalls, double charging, a capacity limit). It is not a CHF: no
// rating, no persistence, no 3GPP validation beyond what loadgen sends.
//
// A Server is safe for concurrent use.
package fakechf

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// Options configure faults and accounts.
type Options struct {
	// Accounts is the number of subscribers provisioned from First.
	Accounts int
	First    string // "imsi-001010000000001"
	Balance  int64  // initial balance of every account
	// Delay, when set, returns the service delay of each request.
	Delay func() time.Duration
	// ChargeTwice debits twice what it reports in X-Chf-Charged.
	ChargeTwice bool
	// Capacity, when positive, serves at most this many requests per
	// second (one at a time, each taking 1/Capacity): beyond it requests
	// queue, as in an overloaded server.
	Capacity float64
	// Shed, when set, tells for each request whether to refuse it as an
	// overloaded CHF does (503 NF_CONGESTION with Retry-After), after
	// ShedDelay.
	Shed      func() bool
	ShedDelay time.Duration
	// ShedOnce, when set, tells for each charging request arriving for
	// the first time (by its identity: path, subscriber,
	// invocationSequenceNumber and invocationTimeStamp) whether to shed
	// it as Shed does; its repeats are admitted. ShedGap, when set, is
	// told how long after its refusal a request shed so came again.
	ShedOnce func() bool
	ShedGap  func(time.Duration)
	// RetryAfter is the Retry-After value of a shed answer: "" sends
	// "1" (as the CHF does), "-" none.
	RetryAfter string
	// Lose, when set, tells for each charging request applied whether to
	// lose its answer, as a CHF whose instance dies after the write does:
	// the request is charged and answered 500. With Lose set the fake
	// also answers a repeat of a request it applied (same path,
	// subscriber, invocationSequenceNumber and invocationTimeStamp) as it
	// answered the first, its X-Chf-Charged included, charging nothing
	// again, as the CHF's replays do.
	Lose func() bool
	// ShedRepeats, with Lose, refuses the first ShedRepeats repeats of a
	// request whose answer was lost with 503 NF_CONGESTION, as a CHF
	// shedding retries under the overload its failure caused: the refusal
	// tells that the repeat charged nothing, not that the first did not.
	ShedRepeats int
	// Drop, when set, tells for each charging request applied whether to
	// drop its answer: the request is charged and never answered (the
	// client times out), as when the answer is lost on the way. A repeat
	// of it is answered as the first was to be, as with Lose. DropAll
	// drops every answer to a charging request, repeats included.
	Drop    func() bool
	DropAll bool
}

// answer is what the fake answered a request it applied (Options.Lose).
type answer struct {
	charged int64
	status  int
	session string
	shed    int // repeats refused so far (Options.ShedRepeats)
}

type account struct {
	balance  int64
	reserved map[string]int64
}

// Server is the fake CHF.
type Server struct {
	opts     Options
	mu       sync.Mutex
	accounts map[string]*account
	nextID   atomic.Uint64
	stallMu  sync.RWMutex // held for writing during a stall
	capMu    sync.Mutex
	capNext  time.Time
	srv      *http.Server
	ln       net.Listener
	answers  map[string]answer    // by request identity, with Options.Lose or Drop
	seen     map[string]time.Time // identities that arrived (when shed, if they were), with Options.ShedOnce
	done     chan struct{}        // closed by Close: dropped answers' handlers return
	// Requests counts every request served, Sheds those answered 503
	// (Options.Shed, ShedRepeats) and Dropped those left unanswered
	// (Options.Drop).
	Requests atomic.Int64
	Sheds    atomic.Int64
	Dropped  atomic.Int64
}

// Price of one unit: data per MiB, voice per second, events per unit.
const (
	pricePerMB     = 1
	octetsPerUnit  = 1_000_000
	pricePerSecond = 1
	pricePerEvent  = 5
	reservePerReq  = 50
)

// Start listens on 127.0.0.1:0 and serves.
func Start(opts Options) (*Server, error) {
	if opts.First == "" {
		opts.First = "imsi-001010000000001"
	}
	s := &Server{opts: opts, accounts: map[string]*account{}, seen: map[string]time.Time{}, done: make(chan struct{})}
	prefix := strings.TrimRight(opts.First, "0123456789")
	digits := opts.First[len(prefix):]
	base, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("cannot parse first SUPI: %w", err)
	}
	for i := 0; i < opts.Accounts; i++ {
		n := strconv.FormatUint(base+uint64(i), 10)
		n = strings.Repeat("0", max(0, len(digits)-len(n))) + n
		s.accounts[prefix+n] = &account{balance: opts.Balance, reserved: map[string]int64{}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: h2c.NewHandler(http.HandlerFunc(s.serve), &http2.Server{MaxConcurrentStreams: 1000})}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.srv.Close()
}

// Stall blocks every request arriving in the next d (and those in
// progress that have not answered) until d has passed.
func (s *Server) Stall(d time.Duration) {
	s.stallMu.Lock()
	go func() {
		time.Sleep(d)
		s.stallMu.Unlock()
	}()
}

// Balance returns an account's balance and total reservation.
func (s *Server) Balance(supi string) (balance, reserved int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[supi]
	if a == nil {
		return 0, 0, false
	}
	for _, v := range a.reserved {
		reserved += v
	}
	return a.balance, reserved, true
}

type units struct {
	TotalVolume          uint64 `json:"totalVolume"`
	Time                 uint64 `json:"time"`
	ServiceSpecificUnits uint64 `json:"serviceSpecificUnits"`
}

type cdr struct {
	SUPI    string `json:"subscriberIdentifier"`
	OneTime bool   `json:"oneTimeEvent"`
	Seq     uint32 `json:"invocationSequenceNumber"`
	Stamp   string `json:"invocationTimeStamp"`
	MUU     []struct {
		RG        uint32  `json:"ratingGroup"`
		Requested *units  `json:"requestedUnit"`
		Used      []units `json:"usedUnitContainer"`
	} `json:"multipleUnitUsage"`
}

// price rates one container as the CHF's built-in default tariff does
// (ocp/README.md: ceil(N × price / unit); data 1 per 1,000,000 octets,
// voice 1 per second, SMS 5 per event), so that loadgen's independent
// audit, which rates with that tariff, reconciles against the fake.
func price(u units) int64 {
	return int64((u.TotalVolume+octetsPerUnit-1)/octetsPerUnit)*pricePerMB + int64(u.Time)*pricePerSecond + int64(u.ServiceSpecificUnits)*pricePerEvent
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	s.stallMu.RLock()
	s.stallMu.RUnlock()
	if s.opts.Capacity > 0 {
		per := time.Duration(float64(time.Second) / s.opts.Capacity)
		s.capMu.Lock()
		now := time.Now()
		if s.capNext.Before(now) {
			s.capNext = now
		}
		s.capNext = s.capNext.Add(per)
		wait := s.capNext.Sub(now)
		s.capMu.Unlock()
		time.Sleep(wait)
	}
	if s.opts.Delay != nil {
		time.Sleep(s.opts.Delay())
	}
	if s.opts.Shed != nil && s.opts.Shed() {
		time.Sleep(s.opts.ShedDelay)
		s.shed(w)
		return
	}
	const base = "/nchf-convergedcharging/v3/chargingdata"
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/chf/v1/accounts/"):
		supi := strings.TrimPrefix(r.URL.Path, "/chf/v1/accounts/")
		b, rs, ok := s.Balance(supi)
		if !ok {
			http.Error(w, `{"status":404}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"supi":%q,"balance":%d,"reserved":%d,"available":%d,"currency":"EUR"}`, supi, b, rs, b-rs)
	case r.Method == http.MethodPost && r.URL.Path == base:
		s.charge(w, r, "", false)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/update"):
		s.charge(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, base+"/"), "/update"), false)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/release"):
		s.charge(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, base+"/"), "/release"), true)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) charge(w http.ResponseWriter, r *http.Request, ref string, release bool) {
	var req cdr
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	supi := req.SUPI
	session := ""
	if ref != "" {
		i := strings.LastIndexByte(ref, '.')
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		supi, session = ref[:i], ref[i+1:]
	}
	s.mu.Lock()
	a := s.accounts[supi]
	if a == nil {
		s.mu.Unlock()
		http.Error(w, `{"cause":"USER_UNKNOWN"}`, http.StatusNotFound)
		return
	}
	var id string
	replays := s.opts.Lose != nil || s.opts.Drop != nil || s.opts.DropAll
	if replays || s.opts.ShedOnce != nil {
		id = fmt.Sprintf("%s|%s|%d|%s", r.URL.Path, supi, req.Seq, req.Stamp)
	}
	if s.opts.ShedOnce != nil {
		at, ok := s.seen[id]
		switch {
		case !ok && s.opts.ShedOnce():
			s.seen[id] = time.Now()
			s.mu.Unlock()
			s.shed(w)
			return
		case !ok:
			s.seen[id] = time.Time{}
		case !at.IsZero() && s.opts.ShedGap != nil:
			s.opts.ShedGap(time.Since(at))
		}
	}
	if replays {
		if an, ok := s.answers[id]; ok {
			refuse := an.shed < s.opts.ShedRepeats
			if refuse {
				an.shed++
				s.answers[id] = an
			}
			s.mu.Unlock()
			if refuse {
				s.shed(w)
				return
			}
			if s.opts.DropAll {
				s.drop(r)
				return
			}
			s.answer(w, r, &req, supi, an)
			return
		}
	}
	if ref != "" {
		if _, ok := a.reserved[session]; !ok {
			s.mu.Unlock()
			http.NotFound(w, r)
			return
		}
	}
	var charged int64
	for _, m := range req.MUU {
		for _, u := range m.Used {
			charged += price(u)
		}
		if req.OneTime && m.Requested != nil {
			charged += price(*m.Requested)
		}
	}
	debit := charged
	if s.opts.ChargeTwice {
		debit *= 2
	}
	a.balance -= debit
	status := http.StatusOK
	switch {
	case req.OneTime:
		status = http.StatusCreated
	case ref == "":
		session = fmt.Sprintf("%016x", s.nextID.Add(1))
		a.reserved[session] = reservePerReq
		status = http.StatusCreated
	case release:
		delete(a.reserved, session)
		status = http.StatusNoContent
	}
	an := answer{charged: charged, status: status, session: session}
	lose, drop := false, false
	if replays {
		if s.answers == nil {
			s.answers = map[string]answer{}
		}
		s.answers[id] = an
		lose = s.opts.Lose != nil && s.opts.Lose()
		drop = !lose && (s.opts.DropAll || s.opts.Drop != nil && s.opts.Drop())
	}
	s.mu.Unlock()
	if drop {
		s.drop(r)
		return
	}
	if lose {
		http.Error(w, `{"status":500,"cause":"SYSTEM_FAILURE"}`, http.StatusInternalServerError)
		return
	}
	s.answer(w, r, &req, supi, an)
}

// drop leaves r unanswered until the client gives up on it or the server
// closes.
func (s *Server) drop(r *http.Request) {
	s.Dropped.Add(1)
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// shed refuses a request as an overloaded CHF does.
func (s *Server) shed(w http.ResponseWriter) {
	s.Sheds.Add(1)
	switch ra := s.opts.RetryAfter; ra {
	case "":
		w.Header().Set("Retry-After", "1")
	case "-":
	default:
		w.Header().Set("Retry-After", ra)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `{"status":503,"cause":"NF_CONGESTION"}`)
}

// answer writes an applied request's answer.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req *cdr, supi string, an answer) {
	w.Header().Set("X-Chf-Charged", strconv.FormatInt(an.charged, 10))
	if an.status == http.StatusCreated && !req.OneTime {
		w.Header().Set("Location", "http://"+r.Host+"/nchf-convergedcharging/v3/chargingdata/"+supi+"."+an.session)
	}
	status := an.status
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"invocationSequenceNumber":%d,"multipleUnitInformation":[{"resultCode":"SUCCESS","ratingGroup":%d}]}`, req.Seq, rg(*req))
}

func rg(r cdr) uint32 {
	if len(r.MUU) > 0 {
		return r.MUU[0].RG
	}
	return 0
}
