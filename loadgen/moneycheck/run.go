// Package moneycheck is a model-based money checker, the way Jepsen
// checks databases: it starts the real CHF services as separate processes
// (package local: aslite with a data directory and --commit sync, abm,
// ocp, cgw), provisions a few accounts so that operations collide on
// them, sends random, seeded sequences of Nchf and operator API requests
// with its own minimal HTTP client (creates, updates, releases, IEC and
// PEC events, top-ups with money and buckets, balance reads,
// retransmissions, duplicated and reordered requests, parallel requests
// on one account, operator aborts and unbars) while it kills (-9) and
// stops (SIGSTOP/SIGCONT) the services, and compares every answer and
// every account's balance, reservations, debits, overage, offline total,
// credits and buckets with an independent model of the tariff and the
// spec's rules (model.go). A request whose answer is lost is retried with
// the same identity until it gets a definite answer, and the model allows
// both outcomes until then; a top-up, which has no identity, stays in
// doubt until a balance read settles it.
// At the end it stops the CHF cleanly and compares each account's
// CHF-CDR charges with the model's debits (cdr.go).
//
// On a mismatch it stops, prints the seed, the failing account's history
// and a shrunk reproduction (run.go, shrink.go). See README.md.
package moneycheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/local"
)

// DefaultTariff is the checker's tariff (the OCP's --tariff file and the
// model's prices): small prices against small balances, so that grants
// shrink, accounts run dry and usage turns into overage, and a maxGrant
// on every rating group.
const DefaultTariff = `ratingGroups:
  - {ratingGroup: 10, service: data, price: 7, defaultGrant: 5000000, maxGrant: 20000000, validityTime: 3600, quotaHoldingTime: 3600}
  - {ratingGroup: 20, service: voice, price: 2, defaultGrant: 60, maxGrant: 300, validityTime: 3600, quotaHoldingTime: 3600}
  - {ratingGroup: 30, service: sms, price: 5, defaultGrant: 1, maxGrant: 10, validityTime: 3600, quotaHoldingTime: 3600}
`

// Config configures a check. Zero values take the defaults.
type Config struct {
	// CHF is the chf binary (required).
	CHF string
	// Seed seeds every random choice (operations and faults).
	Seed uint64
	// Ops stops the run after this many operations (0 = no limit);
	// Duration after this long (default 30 s). The first reached ends it.
	Ops      int
	Duration time.Duration
	// Accounts is how many accounts the operations go to (default 4);
	// every fourth is postpaid with CreditLimit (default 300).
	Accounts    int
	Balance     int64 // initial balance of each account (default 1,000 minor units)
	CreditLimit int64
	// Faults are the faults injected, one at a time, every FaultInterval
	// on average (default 2 s); none when empty.
	Faults        []Fault
	FaultInterval time.Duration
	// Rate bounds the operations per second (default 100).
	Rate float64
	// Avoid keeps known defects (Defects) out of the operation mix.
	Avoid []string
	// ShrinkTime bounds the shrinking of a failure (default 60 s; <0 =
	// none).
	ShrinkTime time.Duration
	// Tariff is a tariff file for the OCP and the model ("" =
	// DefaultTariff).
	Tariff string
	// WorkDir holds aslite's data and the tariff (default a temporary
	// directory, removed after a run that found nothing).
	WorkDir string
	// Logs receives the services' logs (default: WorkDir/chf.log).
	Logs io.Writer
	// NoCDR turns the CDR check off (cdr.go): by default the OCP writes
	// CHF-CDRs into WorkDir/cdr and, at the end of a run without a
	// mismatch, the CHF is stopped cleanly and every account's CDR
	// charges are compared with the model's debits.
	NoCDR bool
	// Progress, when set, receives a line every 5 s.
	Progress io.Writer
	Logger   *slog.Logger
}

// ErrMismatch is wrapped by Run's error when the CHF answered or kept
// money otherwise than the model.
var ErrMismatch = errors.New("moneycheck: mismatch between the CHF and the model")

// ErrConfig is wrapped by Run's error for a Config it cannot run.
var ErrConfig = errors.New("moneycheck: invalid config")

// Result is what a check did and found.
type Result struct {
	Seed       uint64
	Ops        int            // operations sent (retries not counted)
	Steps      int            // steps (an operation, or several sent together)
	Retries    int            // sends beyond the first (answers lost or shed)
	InDoubt    int            // answers lost at least once
	Faults     map[string]int // injected, by ACTION:SERVICE
	Mismatches int
	Duration   time.Duration
	Avoided    []string
	// CDR is what the CDR check did.
	CDR CDRResult
	// Failure describes the first mismatch.
	Failure *Failure
	// WorkDir is kept after a failure.
	WorkDir string
}

// Failure is a mismatch with what reproduces it.
type Failure struct {
	Account int
	SUPI    string
	Reason  string
	// History is the account's steps up to the failure with the answers.
	History []string
	// Repro is the shrunk sequence of operations that still fails on a
	// fresh account without faults, or the whole history when it does
	// not; ReproNote says which.
	Repro     []string
	ReproNote string
	// Faults are the faults injected until the failure, with their
	// times since the run began (as the history's).
	Faults []string
}

const (
	first     = "imsi-001019900000001"
	spares    = 64 // fresh accounts of each plan for shrinking
	opTimeout = 90 * time.Second
)

func (c *Config) defaults() error {
	if c.CHF == "" {
		return fmt.Errorf("%w: CHF: the chf binary is required", ErrConfig)
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.Accounts == 0 {
		c.Accounts = 4
	}
	if c.Balance == 0 {
		c.Balance = 1000
	}
	if c.CreditLimit == 0 {
		c.CreditLimit = 300
	}
	if c.FaultInterval == 0 {
		c.FaultInterval = 2 * time.Second
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.ShrinkTime == 0 {
		c.ShrinkTime = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Accounts < 1 || c.Accounts > 64:
		return fmt.Errorf("%w: accounts: %d, want 1..64", ErrConfig, c.Accounts)
	case c.Ops < 0:
		return fmt.Errorf("%w: ops: must not be negative", ErrConfig)
	case c.Duration < 0:
		return fmt.Errorf("%w: duration: must not be negative", ErrConfig)
	case c.Balance < 0 || c.CreditLimit < 0:
		return fmt.Errorf("%w: balance and credit limit must not be negative", ErrConfig)
	case c.Rate < 0 || c.Rate > 500:
		return fmt.Errorf("%w: rate: %g, want 0..500 operations a second", ErrConfig, c.Rate)
	case c.FaultInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: fault interval: %v, want at least 100ms", ErrConfig, c.FaultInterval)
	}
	for _, a := range c.Avoid {
		if !contains(Defects, a) {
			return fmt.Errorf("%w: avoid: unknown defect %q (want %s)", ErrConfig, a, strings.Join(Defects, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// account is one account under test and its candidate states.
type account struct {
	idx     int
	supi    string
	postpay bool
	gen     *generator
	cands   []*state
	history []*step
	initial int64
}

func (a *account) initialState(c *Config) *state {
	s := &state{balance: c.Balance}
	if a.postpay {
		s.limit = c.CreditLimit
	}
	return s
}

type runner struct {
	cfg    Config
	model  *Model
	cl     *client
	faults *injector
	log    *slog.Logger
	avoid  map[string]bool

	pace     sync.Mutex
	nextSlot time.Time

	ops, steps, retries, inDoubt atomic.Int64

	failOnce sync.Once
	failed   atomic.Bool
	failure  *Failure
	failAcct *account
	cancel   context.CancelFunc
}

// Run runs a check as cfg says. It returns the result and, when the CHF
// disagreed with the model, an error wrapping ErrMismatch; other errors
// are the check's own (a service that cannot start or restart, a request
// that never got a definite answer).
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	res = &Result{Seed: cfg.Seed, Avoided: append([]string(nil), cfg.Avoid...), CDR: CDRResult{Off: cfg.NoCDR}}
	work := cfg.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "moneycheck-"); err != nil {
			return nil, fmt.Errorf("cannot create a work directory: %w", err)
		}
		defer func() {
			if err == nil {
				os.RemoveAll(work)
			} else {
				res.WorkDir = work
			}
		}()
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the work directory: %w", err)
	}
	tariffFile := cfg.Tariff
	if tariffFile == "" {
		tariffFile = filepath.Join(work, "tariff.yaml")
		if err := os.WriteFile(tariffFile, []byte(DefaultTariff), 0o644); err != nil {
			return nil, fmt.Errorf("cannot write the tariff: %w", err)
		}
	}
	tariff, err := audit.LoadTariff(tariffFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, rg := range []uint32{rgData, rgVoice, rgSMS} {
		if r, ok := tariff.Rating(rg); !ok || r.Service != svcNames[rg/10-1] {
			return nil, fmt.Errorf("%w: tariff: rating group %d must be %s", ErrConfig, rg, svcNames[rg/10-1])
		}
	}
	logs := cfg.Logs
	if logs == nil {
		f, err := os.Create(filepath.Join(work, "chf.log"))
		if err != nil {
			return nil, fmt.Errorf("cannot create chf.log: %w", err)
		}
		defer f.Close()
		logs = f
	}
	n := cfg.Accounts + 2*spares
	var plans []local.Plan
	for i := range cfg.Accounts {
		if i%4 == 3 {
			plans = append(plans, local.Plan{Offset: i, Count: 1, Balance: cfg.Balance, CreditLimit: cfg.CreditLimit})
		}
	}
	plans = append(plans, local.Plan{Offset: cfg.Accounts + spares, Count: spares, Balance: cfg.Balance, CreditLimit: cfg.CreditLimit})
	lcfg := local.Config{
		Exe: cfg.CHF, Nchf: "127.0.0.1:0", Accounts: n, Balance: cfg.Balance, First: first, Plans: plans,
		AsliteDataDir: filepath.Join(work, "aslite"), AsliteCommit: "sync",
		Args: map[string][]string{"ocp": {"--tariff", tariffFile}}, Logs: logs, Logger: cfg.Logger,
		ReadyTimeout: 2 * time.Minute,
	}
	if !cfg.NoCDR {
		lcfg.CDRDir = filepath.Join(work, "cdr")
	}
	chf, err := local.Start(ctx, lcfg)
	if err != nil {
		return nil, fmt.Errorf("cannot start the CHF: %w", err)
	}
	defer chf.Stop()

	r := &runner{cfg: cfg, model: NewModel(tariff), log: cfg.Logger, avoid: map[string]bool{}}
	for _, a := range cfg.Avoid {
		r.avoid[a] = true
	}
	r.cl = newClient(chf.Addrs["cgw"], tariff, time.Now().Truncate(time.Second))
	defer r.cl.close()
	r.faults = newInjector(chf, cfg.Faults, cfg.FaultInterval, cfg.Seed)

	accts := make([]*account, cfg.Accounts)
	for i := range accts {
		supi, err := provision.SUPI(first, i)
		if err != nil {
			return nil, fmt.Errorf("cannot name account %d: %w", i, err)
		}
		a := &account{idx: i, supi: supi, postpay: i%4 == 3, initial: cfg.Balance}
		a.gen = newGenerator(cfg.Seed*1_000_003+uint64(i), r.model, r.avoid)
		a.cands = []*state{a.initialState(&cfg)}
		accts[i] = a
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	genCtx, stopGen := context.WithTimeout(runCtx, cfg.Duration)
	defer stopGen()
	faultCtx, stopFaults := context.WithCancel(runCtx)
	var faultErr error
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		if err := r.faults.run(faultCtx); err != nil {
			faultErr = err
			cancel()
		}
	}()
	go func() { // a service that dies on its own ends the run
		select {
		case <-chf.Done():
			cancel()
		case <-runCtx.Done():
		}
	}()
	if cfg.Progress != nil {
		go r.progress(genCtx, start)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(accts))
	for i, a := range accts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.work(genCtx, runCtx, a)
		}()
	}
	wg.Wait()
	stopFaults()
	fwg.Wait()
	res.Faults = r.faults.Counts()
	if faultErr != nil {
		return r.finish(res, start), faultErr
	}
	if cerr := chf.Err(); cerr != nil {
		return r.finish(res, start), fmt.Errorf("cannot go on: %w", cerr)
	}
	if ctx.Err() != nil {
		return r.finish(res, start), ctx.Err()
	}
	if err := errors.Join(errs...); err != nil && r.failure == nil {
		return r.finish(res, start), err
	}

	if r.failure == nil {
		// Quiesce: every answer is definite; wait until nothing sent
		// before can land, release every session, read every account.
		if len(cfg.Faults) > 0 {
			sleep(runCtx, settleMargin)
		}
		for _, a := range accts {
			if err := r.quiesce(runCtx, a); err != nil {
				return r.finish(res, start), err
			}
			if r.failure != nil {
				break
			}
		}
	}
	cdrFailed := false
	if r.failure == nil && !cfg.NoCDR {
		if err := r.checkCDRs(chf, lcfg.CDRDir, accts, res); err != nil {
			return r.finish(res, start), err
		}
		cdrFailed = r.failure != nil
	}
	res = r.finish(res, start)
	if r.failure != nil {
		res.Mismatches = 1
		if cdrFailed {
			res.Mismatches = len(res.CDR.Mismatches)
		} else {
			r.shrink(ctx, res.Failure, r.failAcct)
		}
		return res, fmt.Errorf("%w: account %s: %s", ErrMismatch, r.failure.SUPI, r.failure.Reason)
	}
	return res, nil
}

func (r *runner) finish(res *Result, start time.Time) *Result {
	res.Ops, res.Steps = int(r.ops.Load()), int(r.steps.Load())
	res.Retries, res.InDoubt = int(r.retries.Load()), int(r.inDoubt.Load())
	res.Duration = time.Since(start)
	res.Failure = r.failure
	if res.Faults == nil {
		res.Faults = map[string]int{}
	}
	return res
}

func (r *runner) progress(ctx context.Context, start time.Time) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(r.cfg.Progress, "check-money: %5.0fs ops %d retries %d in-doubt %d faults %v\n",
				time.Since(start).Seconds(), r.ops.Load(), r.retries.Load(), r.inDoubt.Load(), r.faults.Counts())
		}
	}
}

// wait paces the operations to cfg.Rate.
func (r *runner) wait(ctx context.Context, n int) error {
	r.pace.Lock()
	now := time.Now()
	at := r.nextSlot
	if at.Before(now) {
		at = now
	}
	r.nextSlot = at.Add(time.Duration(float64(n) * float64(time.Second) / r.cfg.Rate))
	r.pace.Unlock()
	if d := time.Until(at); d > 0 {
		sleep(ctx, d)
	}
	return ctx.Err()
}

// work runs steps on a until gen ends (then the step in progress is
// finished under run) or the first mismatch.
func (r *runner) work(gen, run context.Context, a *account) error {
	for gen.Err() == nil {
		if r.cfg.Ops > 0 && r.ops.Load() >= int64(r.cfg.Ops) {
			return nil
		}
		st := a.gen.next(a.cands)
		if err := r.wait(gen, len(st.ops)); err != nil {
			return nil
		}
		r.ops.Add(int64(len(st.ops)))
		if err := r.step(run, a, st); err != nil {
			return err
		}
		if r.failed.Load() || run.Err() != nil {
			return nil
		}
	}
	return nil
}

// step sends st, checks its answers, settles what is in doubt and checks
// a balance read.
func (r *runner) step(ctx context.Context, a *account, st *step) error {
	r.steps.Add(1)
	sent := time.Now()
	st.at = sent.Sub(r.faults.start)
	st.answers = make([]Answer, len(st.ops))
	reqs := make([]request, len(st.ops))
	h2 := make([]bool, len(st.ops))
	for i, op := range st.ops {
		reqs[i] = r.cl.build(op, a.supi, a.gen.ref(a.supi, op.Sess))
		h2[i] = a.gen.rng.IntN(2) == 0
	}
	if st.ordered || len(st.ops) == 1 {
		for i, op := range st.ops {
			st.answers[i] = r.send(ctx, op, &reqs[i], h2[i])
		}
	} else {
		var wg sync.WaitGroup
		for i, op := range st.ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st.answers[i] = r.send(ctx, op, &reqs[i], h2[i])
			}()
		}
		wg.Wait()
	}
	a.history = append(a.history, st)
	if ctx.Err() != nil {
		return nil
	}
	unsettled := false
	for i, op := range st.ops {
		ans := &st.answers[i]
		if ans.InDoubt {
			return fmt.Errorf("cannot settle %s on %s within %v: %s", op, a.supi, opTimeout, ans.Err)
		}
		// A request without identity that was sent more than once may
		// still land after the answer: wait until it cannot.
		unsettled = unsettled || ans.Tries > 1 && (op.Kind == KindAbort || op.Kind == KindUnbar)
	}
	next, why, err := r.model.advance(a.cands, st.ops, st.answers)
	if err != nil {
		return fmt.Errorf("account %s: %w", a.supi, err)
	}
	if len(next) == 0 {
		st.why = why
		r.fail(a, why)
		return nil
	}
	a.cands = next
	a.gen.learn(st)
	if unsettled {
		if err := r.faults.quiet(ctx, sent); err != nil {
			return nil
		}
	}
	return r.read(ctx, a, st)
}

// read reads a's balance after st and keeps the candidates it matches;
// it also checks that money is conserved whatever the model says.
func (r *runner) read(ctx context.Context, a *account, st *step) error {
	op := &Op{Kind: KindBalance}
	req := r.cl.build(op, a.supi, "")
	ans := r.send(ctx, op, &req, a.gen.rng.IntN(2) == 0)
	if ctx.Err() != nil {
		return nil
	}
	if ans.InDoubt || ans.Account == nil {
		return fmt.Errorf("cannot read the balance of %s: %s %s", a.supi, ans.String(), ans.Err)
	}
	st.read = ans.Account
	v := ans.Account
	if v.Balance+v.Debited != a.initial+v.Credited || v.Available != v.Balance-v.Reserved {
		why := fmt.Sprintf("balance inquiry {%s} breaks conservation: balance + debited = %d, initial + credited = %d", v, v.Balance+v.Debited, a.initial+v.Credited)
		st.why = why
		r.fail(a, why)
		return nil
	}
	next, why := observe(a.cands, v)
	if len(next) == 0 {
		st.why = why
		r.fail(a, why)
		return nil
	}
	a.cands = next
	return nil
}

// send sends op until it gets a definite answer or opTimeout passes (a
// top-up with the same Idempotency-Key).
func (r *runner) send(ctx context.Context, op *Op, req *request, h2 bool) Answer {
	deadline := time.Now().Add(opTimeout)
	backoff := 100 * time.Millisecond
	for try := 1; ; try++ {
		ans := r.cl.send(ctx, req, try > 1, h2)
		ans.Tries = try
		if ans.Account != nil && r.avoid[DefectBucketHeldTwice] {
			ans.Account.HeldElsewhere = 0
		}
		if !ans.InDoubt || ctx.Err() != nil {
			return ans
		}
		if try == 1 {
			r.inDoubt.Add(1)
		}
		if time.Now().After(deadline) {
			return ans
		}
		r.retries.Add(1)
		sleep(ctx, backoff)
		backoff = min(2*backoff, time.Second)
		h2 = !h2 // the other front, as a client would try another connection
	}
}

// fail records the first mismatch and stops the run.
func (r *runner) fail(a *account, why string) {
	r.failOnce.Do(func() {
		r.failAcct = a
		r.failure = &Failure{Account: a.idx, SUPI: a.supi, Reason: why, History: historyLines(a.history), Faults: r.faults.Log()}
		r.failed.Store(true)
		r.cancel()
	})
}

func historyLines(h []*step) []string {
	var out []string
	for _, st := range h {
		mode := ""
		if len(st.ops) > 1 {
			mode = "parallel"
			if st.ordered {
				mode = "in this order"
			}
			out = append(out, fmt.Sprintf("%.3fs step of %d (%s):", st.at.Seconds(), len(st.ops), mode))
		}
		for i, op := range st.ops {
			line := op.String()
			if len(st.ops) == 1 {
				line = fmt.Sprintf("%.3fs %s", st.at.Seconds(), line)
			}
			if i < len(st.answers) {
				line += "  →  " + st.answers[i].String()
				if st.answers[i].Tries > 1 {
					line += fmt.Sprintf(" (after %d sends)", st.answers[i].Tries)
				}
			}
			if len(st.ops) > 1 {
				line = "  " + line
			}
			out = append(out, line)
		}
		if st.read != nil {
			out = append(out, "  read: "+st.read.String())
		}
		if st.why != "" {
			out = append(out, "  MISMATCH: "+st.why)
		}
	}
	return out
}

// quiesce releases every session the client knows on a and checks the
// final balance: nothing reserved, and the model's state.
func (r *runner) quiesce(ctx context.Context, a *account) error {
	if a.gen.barred {
		if err := r.step(ctx, a, &step{ops: []*Op{a.gen.op(KindUnbar)}}); err != nil || r.failed.Load() {
			return err
		}
	}
	for len(a.gen.sessions) > 0 {
		s := a.gen.sessions[0]
		op := a.gen.session(a.cands, s, KindRelease)
		for i := range op.Lines {
			op.Lines[i].Offline = false // the end of the run: plain final usage
		}
		if err := r.step(ctx, a, &step{ops: []*Op{op}}); err != nil || r.failed.Load() {
			return err
		}
		a.gen.drop(s.id)
	}
	final := &step{}
	a.history = append(a.history, final)
	if err := r.read(ctx, a, final); err != nil || r.failed.Load() {
		return err
	}
	if v := a.history[len(a.history)-1].read; v != nil && v.Reserved != 0 {
		r.fail(a, fmt.Sprintf("every session released, yet %d is still reserved", v.Reserved))
	}
	return nil
}

// FormatResult writes the result as the command prints it.
func FormatResult(w io.Writer, res *Result) {
	fmt.Fprintf(w, "check-money: seed %d, %d operations in %d steps, %d sends retried, %d answers in doubt, %s\n",
		res.Seed, res.Ops, res.Steps, res.Retries, res.InDoubt, res.Duration.Round(time.Millisecond))
	keys := make([]string, 0, len(res.Faults))
	total := 0
	for k, v := range res.Faults {
		keys = append(keys, k)
		total += v
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "faults injected: %d", total)
	for _, k := range keys {
		fmt.Fprintf(w, " %s=%d", k, res.Faults[k])
	}
	fmt.Fprintln(w)
	if len(res.Avoided) > 0 {
		fmt.Fprintf(w, "known defects kept out of the mix: %s\n", strings.Join(res.Avoided, ", "))
	}
	formatCDR(w, &res.CDR)
	fmt.Fprintf(w, "mismatches: %d\n", res.Mismatches)
	if f := res.Failure; f != nil {
		fmt.Fprintf(w, "\nMISMATCH on account %s (seed %d): %s\n\nhistory of %s:\n", f.SUPI, res.Seed, f.Reason, f.SUPI)
		for _, l := range f.History {
			fmt.Fprintln(w, "  "+l)
		}
		if len(f.Faults) > 0 {
			fmt.Fprintf(w, "\nfaults:\n")
			for _, l := range f.Faults {
				fmt.Fprintln(w, "  "+l)
			}
		}
		fmt.Fprintf(w, "\nreproduction (%s):\n", f.ReproNote)
		for _, l := range f.Repro {
			fmt.Fprintln(w, "  "+l)
		}
	}
	if res.WorkDir != "" {
		fmt.Fprintf(w, "work directory kept: %s\n", res.WorkDir)
	}
}

// NewSeed returns a random seed.
func NewSeed() uint64 { return rand.Uint64() % 1_000_000_000 }
