package moneycheck

import (
	"slices"
	"strings"
	"testing"
)

// TestCompareCDRs checks the CDR rule: charges equal the model's debits
// per account when exact, at most them after an OCP kill, and no charge
// on a subscriber the run did not use in either mode.
func TestCompareCDRs(t *testing.T) {
	const a, b, x = "imsi-001019900000001", "imsi-001019900000002", "imsi-001019900000099"
	debited := map[string]int64{a: 700, b: 0}
	tests := []struct {
		name    string
		charged map[string]int64
		exact   bool
		want    []string // mismatching subscribers, sorted
	}{
		{"equal", map[string]int64{a: 700}, true, nil},
		{"equal, zero charge recorded", map[string]int64{a: 700, b: 0}, true, nil},
		{"a record lost", map[string]int64{a: 693}, true, []string{a}},
		{"a record lost after an OCP kill", map[string]int64{a: 693}, false, nil},
		{"nothing recorded after an OCP kill", nil, false, nil},
		{"charged twice", map[string]int64{a: 1400}, true, []string{a}},
		{"charged twice after an OCP kill", map[string]int64{a: 1400}, false, []string{a}},
		{"charge on an account with no debit", map[string]int64{a: 700, b: 5}, false, []string{b}},
		{"charge on a subscriber the run did not use", map[string]int64{a: 700, x: 5}, true, []string{x}},
		{"unused subscriber, after an OCP kill", map[string]int64{a: 700, x: 5}, false, []string{x}},
		{"unused subscriber with zero charge", map[string]int64{a: 700, x: 0}, true, nil},
		{"several", map[string]int64{a: 1, b: 2, x: 3}, true, []string{a, b, x}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareCDRs(tt.charged, debited, tt.exact)
			var subs []string
			for _, m := range got {
				subs = append(subs, m.supi)
				if m.supi == x && !strings.Contains(m.String(), "the run sent it nothing") ||
					m.supi != x && !strings.Contains(m.String(), "the model debited") {
					t.Errorf("mismatch text %q", m)
				}
			}
			if !slices.Equal(subs, tt.want) {
				t.Errorf("mismatches %v, want %v", subs, tt.want)
			}
		})
	}
}

// TestFormatCDR checks the CDR check's lines in each outcome.
func TestFormatCDR(t *testing.T) {
	tests := []struct {
		name string
		c    CDRResult
		want []string
	}{
		{"off", CDRResult{Off: true}, []string{"CDR check: off"}},
		{"not run", CDRResult{}, []string{"CDR check: not run"}},
		{"exact", CDRResult{Ran: true, Exact: true, Records: 9, Replays: 2, Duplicates: 1, Charged: 700, Debited: 700, Accounts: 4},
			[]string{"9 records read (2 replay records, 1 dropped", "charged 700 = model debited 700, equal on each of 4 accounts"}},
		{"skipped", CDRResult{Ran: true, Records: 3, Charged: 600, Debited: 700, Accounts: 4},
			[]string{"CDR check skipped: an OCP was killed (its open records are lost)", "charged 600, model debited 700"}},
		{"mismatch", CDRResult{Ran: true, Exact: true, Charged: 600, Debited: 700, Accounts: 4, Mismatches: []string{"imsi-1: CDRs charge 600, the model debited 700"}},
			[]string{"charged 600, model debited 700", "CDR MISMATCH imsi-1: CDRs charge 600, the model debited 700"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			formatCDR(&b, &tt.c)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output %q lacks %q", b.String(), w)
				}
			}
		})
	}
}
