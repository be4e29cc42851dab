package audit

import (
	"fmt"
	"sort"

	"github.com/chf-testbed/testbed/cdr/collector"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// CDRResult is the CDR check's verdict (the audit's `cdr` section): after
// the CHF stopped cleanly, the charges of the CHF-CDR files under Dir,
// kept by the collector rule (cdr/collector.Collect: a replay record
// counts only when no other record holds its request), must equal the
// debits the audit read back from the store, per subscriber — replays
// and requests whose answer was lost included.
type CDRResult struct {
	OK      bool   `json:"ok"`
	Skipped bool   `json:"skipped,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Dir     string `json:"dir"`
	Records int    `json:"records"`
	// Replays counts the replay records read, Duplicates those the
	// collector rule dropped (their request was in another record).
	Replays     int   `json:"replay_records"`
	Duplicates  int   `json:"replay_duplicates"`
	Charged     int64 `json:"charged_total"` // sum over the records kept
	Debited     int64 `json:"debited_total"` // sum of the audit's debits
	Subscribers int   `json:"subscribers"`   // subscribers compared
	Mismatches  int   `json:"mismatches"`
	// Examples lists up to 10 mismatches: subscriber, CDR charges, debit.
	Examples []string `json:"examples,omitempty"`
}

// Debit is what one subscriber's balance went down by during the run
// (initial − final), as the audit read it.
type Debit struct {
	Index  int32
	Amount int64
}

// CheckCDR decodes the CDR files under dir (every OCP's: subdirectories
// included), applies the collector rule and compares the charges per
// subscriber with debits (the audit's, Result.Debits; subscribers not
// among them count as debited nothing). Call it once every OCP has
// stopped cleanly: an unfinished file fails the check.
func CheckCDR(dir string, first scenario.SUPI, debits []Debit) CDRResult {
	r := CDRResult{Dir: dir}
	recs, err := collector.DecodeDir(dir)
	if err != nil {
		r.Reason = fmt.Sprintf("cannot read the CDR files: %v", err)
		return r
	}
	r.Records = len(recs)
	for i := range recs {
		if recs[i].Replay {
			r.Replays++
		}
	}
	kept, dropped := collector.Collect(recs)
	r.Duplicates = dropped
	charged := map[string]int64{}
	for i := range kept {
		charged[kept[i].SUPI] += kept[i].Charged
		r.Charged += kept[i].Charged
	}
	var bad []string
	seen := make(map[string]bool, len(debits))
	for _, d := range debits {
		s := first.String(int(d.Index))
		seen[s] = true
		r.Subscribers++
		r.Debited += d.Amount
		if c := charged[s]; c != d.Amount {
			r.Mismatches++
			bad = append(bad, fmt.Sprintf("%s: CDRs charge %d, the balance went down by %d", s, c, d.Amount))
		}
	}
	for s, c := range charged {
		if !seen[s] && c != 0 {
			r.Mismatches++
			r.Subscribers++
			bad = append(bad, fmt.Sprintf("%s: CDRs charge %d, the audit saw no debit", s, c))
		}
	}
	sort.Strings(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
	}
	r.Examples = bad
	r.OK = r.Mismatches == 0
	if !r.OK {
		r.Reason = fmt.Sprintf("%d subscribers whose CDR charges differ from their debits (CDRs %d, debits %d)", r.Mismatches, r.Charged, r.Debited)
	}
	return r
}

// AddCDR puts the CDR check into the audit's verdict: a failed check
// fails the audit.
func (r *Result) AddCDR(c CDRResult) {
	r.CDR = &c
	if c.OK || c.Skipped || r.Skipped {
		return
	}
	r.OK = false
	if r.Reason != "" {
		r.Reason += "; "
	}
	r.Reason += "CDR check: " + c.Reason
}
