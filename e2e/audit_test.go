package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// expectation is a per-subscriber expectation (what the load engine's
// ledger keeps from the audit's rater).
type expectation map[int32]int64

func (e expectation) Expected(i int32) int64 { return e[i] }

// mix drives random sequences of creates, updates, releases and SMS
// events over accounts subscribers from first, with retransmissions (the
// same body again, or flagged with a new timestamp), over HTTP/1.1 to
// base. Every logical request is rated by the audit's own tariff when the
// CHF answers it as charged; every retransmission must answer the same and
// charge nothing.
type mix struct {
	t        *testing.T
	hc       *http.Client
	base     string
	first    string
	rng      *rand.Rand
	tariff   *audit.Tariff
	ledger   *engine.Ledger
	expected expectation
}

type flow struct {
	ref string // ChargingDataRef path, "" when no session is open
	seq int
}

func newMix(t *testing.T, base, first string, accounts int, seed uint64) *mix {
	tariff, err := audit.LoadTariff("")
	if err != nil {
		t.Fatal(err)
	}
	return &mix{t: t, hc: &http.Client{Timeout: 10 * time.Second}, base: base, first: first,
		rng: rand.New(rand.NewPCG(seed, 13)), tariff: tariff, ledger: engine.NewLedger(accounts), expected: expectation{}}
}

func (m *mix) post(url string, body []byte) (int, string, int64) {
	m.t.Helper()
	resp, err := m.hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	ch, _ := strconv.ParseInt(resp.Header.Get(cgw.ChargedHeader), 10, 64)
	loc := resp.Header.Get("Location")
	if resp.StatusCode >= 500 {
		m.t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return resp.StatusCode, loc, ch
}

// send posts body, maybe retransmits it, and books the outcome.
func (m *mix) send(i int32, url string, body []byte, c *driver.Charge) (status int, loc string) {
	m.t.Helper()
	status, loc, charged := m.post(url, body)
	m.ledger.Touch(i)
	m.ledger.Add(i, charged)
	if status/100 == 2 {
		m.expected[i] += m.tariff.Rate(c)
	}
	if m.rng.IntN(3) == 0 {
		again := body
		if m.rng.IntN(2) == 0 {
			var v map[string]any
			if err := json.Unmarshal(body, &v); err != nil {
				m.t.Fatal(err)
			}
			// A retransmission repeats the request's identity (its
			// invocationTimeStamp included) and sets the flag.
			v["retransmissionIndicator"] = true
			again, _ = json.Marshal(v)
		}
		// The repeat is answered as the first was, X-Chf-Charged included
		// (a replay reports the first charge): the ledger counts the
		// logical request once.
		s2, loc2, ch2 := m.post(url, again)
		if s2 != status || loc2 != loc || ch2 != charged {
			m.t.Fatalf("retransmission of %s to %s: %d %q charged %d, first %d %q", body, url, s2, loc2, ch2, status, loc)
		}
	}
	return status, loc
}

// run sends n logical requests.
func (m *mix) run(accounts, n int) {
	first, err := scenario.ParseSUPI(m.first)
	if err != nil {
		m.t.Fatal(err)
	}
	flows := make([]flow, accounts)
	for range n {
		i := int32(m.rng.IntN(accounts))
		s := first.String(int(i))
		f := &flows[i]
		used := m.usage()
		switch {
		case f.ref == "" && m.rng.IntN(4) == 0:
			c := &driver.Charge{Op: driver.ChargeEvent, RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: uint64(1 + m.rng.IntN(3))}}
			body := req(s, 0, fmt.Sprintf(`{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":%d}}`, c.Requested.ServiceSpecific), `"oneTimeEvent":true,"oneTimeEventType":"IEC"`)
			m.send(i, m.base+cgw.NchfBase, body, c)
		case f.ref == "":
			c := &driver.Charge{Op: driver.ChargeCreate, RatingGroup: 10, Request: true}
			status, loc := m.send(i, m.base+cgw.NchfBase, req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`), c)
			if status == 201 {
				f.ref, f.seq = loc, 0
			}
		default:
			f.seq++
			op, path, ru := driver.ChargeUpdate, "/update", `"requestedUnit":{},`
			if m.rng.IntN(3) == 0 {
				op, path, ru = driver.ChargeRelease, "/release", ""
			}
			c := &driver.Charge{Op: op, RatingGroup: 10, Used: used}
			body := req("", f.seq, fmt.Sprintf(`{"ratingGroup":10,%s"usedUnitContainer":[%s]}`, ru, container(f.seq, used)))
			status, _ := m.send(i, f.ref+path, body, c)
			if op == driver.ChargeRelease || status == 404 {
				f.ref = ""
			}
		}
	}
	// End every session.
	for i := range flows {
		if f := &flows[i]; f.ref != "" {
			f.seq++
			c := &driver.Charge{Op: driver.ChargeRelease, RatingGroup: 10}
			m.send(int32(i), f.ref+"/release", req("", f.seq, `{"ratingGroup":10}`), c)
		}
	}
}

// usage draws a data usage: a total, or an uplink + downlink split, of
// 0..12 MB, not a whole number of MB.
func (m *mix) usage() chf.Units {
	v := uint64(m.rng.IntN(12_000_000))
	if m.rng.IntN(2) == 0 {
		return chf.Units{TotalVolume: v}
	}
	up := v / 3
	return chf.Units{UplinkVolume: up, DownlinkVolume: v - up}
}

func container(lsn int, u chf.Units) string {
	if u.TotalVolume != 0 || u.UplinkVolume+u.DownlinkVolume == 0 {
		return fmt.Sprintf(`{"localSequenceNumber":%d,"totalVolume":%d}`, lsn, u.TotalVolume)
	}
	return fmt.Sprintf(`{"localSequenceNumber":%d,"uplinkVolume":%d,"downlinkVolume":%d}`, lsn, u.UplinkVolume, u.DownlinkVolume)
}

// snapshot reads the accounts' balances from balURL ("…/accounts/").
func (m *mix) snapshot(balURL string, accounts int) *audit.Snapshot {
	m.t.Helper()
	first, _ := scenario.ParseSUPI(m.first)
	snap := &audit.Snapshot{}
	for i := range accounts {
		req, err := http.NewRequest("GET", balURL+first.String(i), nil)
		if err != nil {
			m.t.Fatal(err)
		}
		// The balance inquiry takes the operator token the CGW has.
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := m.hc.Do(req)
		if err != nil {
			m.t.Fatal(err)
		}
		var a struct{ Balance, Reserved, Overage int64 }
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			m.t.Fatalf("balance of %s: %d %v", first.String(i), resp.StatusCode, err)
		}
		snap.Index = append(snap.Index, int32(i))
		snap.Accounts = append(snap.Accounts, audit.Account{Balance: a.Balance, Reserved: a.Reserved, Overage: a.Overage, Found: true})
	}
	return snap
}

func (m *mix) check(initial, final *audit.Snapshot) audit.Result {
	first, _ := scenario.ParseSUPI(m.first)
	return audit.Check(audit.Input{First: first, Initial: initial, Final: final, Ledger: m.ledger, Expected: m.expected})
}

// TestRandomSequencesReconcile is the property: random sequences of
// creates, updates, releases, events and retransmissions over a few
// accounts leave every balance at its initial value less the audit's own
// rating of what was sent.
func TestRandomSequencesReconcile(t *testing.T) {
	e := startCHF(t)
	const n = 6
	overage := false
	for seed := uint64(1); seed <= 3; seed++ {
		// Two accounts run dry: refusals, final units and overage.
		setBalance(t, e, supi(4), 40)
		setBalance(t, e, supi(5), 15)
		m := newMix(t, e.base, first, n, seed)
		ini := m.snapshot(e.base+cgw.AccountsBase, n)
		m.run(n, 150)
		r := m.check(ini, m.snapshot(e.base+cgw.AccountsBase, n))
		if !r.OK || !r.Independent || r.Expected != r.Debited+r.Overage || r.Expected == 0 {
			t.Fatalf("seed %d: audit %+v", seed, r)
		}
		overage = overage || r.Overage > 0
	}
	if !overage {
		t.Fatal("no run went beyond a balance: the overage path was not exercised")
	}
}

// TestAuditCatchesMisratingCHF runs the same traffic against `chf local`
// built normally and built with the audit_misrate tag (an OCP that
// overprices data and reports what it charges): the reported charges
// agree with the debits in both, the independent check fails only the
// mis-rating build.
func TestAuditCatchesMisratingCHF(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary twice")
	}
	misrate := buildCHFTags(t, "audit_misrate")
	for _, tc := range []struct {
		name string
		bin  string
		ok   bool
	}{{"real", buildCHF(t), true}, {"audit_misrate", misrate, false}} {
		t.Run(tc.name, func(t *testing.T) {
			lr := startLocalBin(t, tc.bin, "--accounts", "8", "--nchf", "127.0.0.1:0", "--quiet")
			m := newMix(t, strings.TrimSuffix(lr.nchfURL, cgw.NchfBase), "imsi-001010000000001", 8, 7)
			ini := m.snapshot(lr.balURL, 8)
			m.run(8, 80)
			r := m.check(ini, m.snapshot(lr.balURL, 8))
			if r.Mismatches != 0 || r.OK != tc.ok || (r.ExpectedMismatches == 0) != tc.ok {
				t.Fatalf("audit of %s: %+v", tc.name, r)
			}
		})
	}
}

// buildCHFTags builds cmd/chf with build tags into the test's temp dir.
func buildCHFTags(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chf")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", bin, "github.com/chf-testbed/testbed/cmd/chf")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build cmd/chf -tags %s: %v\n%s", tags, err, out)
	}
	return bin
}
