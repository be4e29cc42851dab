package moneycheck

import (
	"fmt"
	"io"
	"sort"

	"github.com/chf-testbed/testbed/cdr/collector"
	"github.com/chf-testbed/testbed/local"
)

// The CDR check. The OCP writes CHF-CDRs (cdr/README.md) into the work
// directory; at the end of a run that quiesced with every balance as the
// model says, the CHF is stopped cleanly (the OCP's recorder writes its
// open records and finishes its file), the files are decoded and the
// collector rule applied (cdr/collector.Collect: a replay record counts
// only when no other record holds its request), and per account the sum
// of the records' charged amounts must equal the model's debited: the
// money taken from the balance. Overage (usage beyond what the balance
// could pay) and offline usage are rated but never debited, so they are
// in no record's charge (their units are in the used-unit containers);
// bucket units are not money; top-ups write no record. An account of the
// range that the run did not use must have no charge at all.
//
// A kill -9 of the OCP loses its open records (a documented limit of the
// recorder), so after one the exact comparison is skipped and only the
// bound is checked: no account's charges exceed its debits (a replay
// record the collector rule should have dropped, a record written twice).

// CDRResult is what the CDR check did.
type CDRResult struct {
	// Off: --cdr off (the OCP wrote no CDRs). Ran: the check ran (the run
	// reached its end without a mismatch). Exact: charges were compared
	// for equality; otherwise (an OCP was killed) only charges ≤ debits.
	Off, Ran, Exact bool
	// Records read, Replays among them, Duplicates the collector rule
	// dropped.
	Records, Replays, Duplicates int
	// Charged is the sum of the records kept, Debited the model's sum
	// over the accounts.
	Charged, Debited int64
	Accounts         int
	// Mismatches lists every account whose charges differ (or, not
	// exact, exceed), with both sums.
	Mismatches []string
}

// cdrMismatch is one account whose CDR charges break the rule.
type cdrMismatch struct {
	supi             string
	charged, debited int64
	unknown          bool // not an account of the run
}

func (m cdrMismatch) String() string {
	if m.unknown {
		return fmt.Sprintf("%s: CDRs charge %d, yet the run sent it nothing", m.supi, m.charged)
	}
	return fmt.Sprintf("%s: CDRs charge %d, the model debited %d", m.supi, m.charged, m.debited)
}

// compareCDRs compares the charges per subscriber with the model's
// debits per account: equal when exact, at most the debit otherwise. A
// subscriber with charges that is not among debited is a mismatch in
// both modes. The result is sorted by subscriber.
func compareCDRs(charged, debited map[string]int64, exact bool) []cdrMismatch {
	var out []cdrMismatch
	for s, d := range debited {
		c := charged[s]
		if c != d && (exact || c > d) {
			out = append(out, cdrMismatch{supi: s, charged: c, debited: d})
		}
	}
	for s, c := range charged {
		if _, ok := debited[s]; !ok && c != 0 {
			out = append(out, cdrMismatch{supi: s, charged: c, unknown: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].supi < out[j].supi })
	return out
}

// checkCDRs stops chf cleanly, reads the CDR files under dir and compares
// them with the model's debits of accts. A mismatch fails the run as the
// other mismatches do (the first account's history, not shrunk: it shows
// only after a clean stop); errors are the check's own.
func (r *runner) checkCDRs(chf *local.CHF, dir string, accts []*account, res *Result) error {
	c := &res.CDR
	if err := chf.Stop(); err != nil {
		return fmt.Errorf("cannot stop the CHF cleanly for the CDR check: %w", err)
	}
	recs, err := collector.DecodeDir(dir)
	if err != nil {
		return fmt.Errorf("cannot read the CDR files: %w", err)
	}
	c.Ran = true
	c.Exact = r.faults.Counts()["kill:ocp"] == 0
	c.Records = len(recs)
	for i := range recs {
		if recs[i].Replay {
			c.Replays++
		}
	}
	kept, dropped := collector.Collect(recs)
	c.Duplicates = dropped
	charged := map[string]int64{}
	for i := range kept {
		charged[kept[i].SUPI] += kept[i].Charged
		c.Charged += kept[i].Charged
	}
	debited := make(map[string]int64, len(accts))
	bySUPI := make(map[string]*account, len(accts))
	for _, a := range accts {
		// Every candidate agrees with the final balance read, debited
		// included (observe), so the first one speaks for all.
		d := a.cands[0].debited
		debited[a.supi] = d
		bySUPI[a.supi] = a
		c.Debited += d
	}
	c.Accounts = len(accts)
	bad := compareCDRs(charged, debited, c.Exact)
	if len(bad) == 0 {
		return nil
	}
	for _, m := range bad {
		c.Mismatches = append(c.Mismatches, m.String())
	}
	m := bad[0]
	rule := "the sum of its CDRs' charges (after the collector rule) must equal the model's debited"
	if !c.Exact {
		rule = "the sum of its CDRs' charges (after the collector rule) must not exceed the model's debited (an OCP was killed: its open records are lost)"
	}
	f := &Failure{Account: -1, SUPI: m.supi, Reason: "CDR check: " + m.String() + "; " + rule,
		ReproNote: "not shrunk (a CDR mismatch shows only after a clean stop): the whole history, rerun with the seed", Faults: r.faults.Log()}
	if a := bySUPI[m.supi]; a != nil {
		f.Account = a.idx
		f.History = historyLines(a.history)
		var steps []*step
		for _, st := range a.history {
			if len(st.ops) > 0 {
				steps = append(steps, st)
			}
		}
		f.Repro = historyOps(steps)
	}
	r.failure = f
	r.failed.Store(true)
	return nil
}

// formatCDR writes the CDR check's lines of the result.
func formatCDR(w io.Writer, c *CDRResult) {
	switch {
	case c.Off:
		fmt.Fprintln(w, "CDR check: off")
		return
	case !c.Ran:
		fmt.Fprintln(w, "CDR check: not run (the run did not end with every balance as the model says)")
		return
	}
	read := fmt.Sprintf("%d records read (%d replay records, %d dropped as duplicates by the collector rule)", c.Records, c.Replays, c.Duplicates)
	switch {
	case !c.Exact:
		fmt.Fprintf(w, "CDR check skipped: an OCP was killed (its open records are lost); checked only that no account's CDR charges exceed its debits: %s, charged %d, model debited %d on %d accounts\n",
			read, c.Charged, c.Debited, c.Accounts)
	case len(c.Mismatches) == 0:
		fmt.Fprintf(w, "CDR check: %s, charged %d = model debited %d, equal on each of %d accounts\n", read, c.Charged, c.Debited, c.Accounts)
	default:
		fmt.Fprintf(w, "CDR check: %s, charged %d, model debited %d on %d accounts\n", read, c.Charged, c.Debited, c.Accounts)
	}
	for _, m := range c.Mismatches {
		fmt.Fprintln(w, "  CDR MISMATCH "+m)
	}
}
