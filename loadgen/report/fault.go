package report

import (
	"fmt"
	"io"
)

// Fault is what one injected fault (loadgen local --fault) did to the
// run. Times are seconds into the measured window, to the second the
// series resolves.
type Fault struct {
	Spec     string `json:"spec"`               // ACTION:SERVICE:AT:FOR
	Instance string `json:"instance,omitempty"` // the instance it hit ("ocp-1")
	// AtS is when it was injected; RestoredS when the instance was
	// restarted and ready again (kill) or continued (stop).
	AtS       float64 `json:"at_s"`
	RestoredS float64 `json:"restored_s"`
	// Errors counts failed requests from the injection until recovery
	// (or the end of the window).
	Errors int64 `json:"errors"`
	// RecoverS is the time from the injection until the run was back to
	// the offered TPS (95%), without errors and with a per-second p99 at
	// most 1.2x BaselineP99Ms (the worst second's p99 before the first
	// fault), for 3 seconds in a row; -1 = not recovered in the window.
	RecoverS      float64 `json:"recover_s"`
	BaselineP99Ms float64 `json:"baseline_p99_ms"`
	PeakP99Ms     float64 `json:"peak_p99_ms"` // worst second from the injection to recovery
	// Error says why the fault could not be injected or undone.
	Error string `json:"error,omitempty"`
}

// writeFaults is the text block of the faults, nothing without any.
func (r *Result) writeFaults(w io.Writer) {
	if len(r.Faults) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfaults (audit below covers the whole run):\n")
	for _, f := range r.Faults {
		rec := "NOT RECOVERED"
		if f.RecoverS >= 0 {
			rec = fmt.Sprintf("recovered in %.0fs", f.RecoverS)
		}
		fmt.Fprintf(w, "  %-24s %-8s at %5.1fs restored %5.1fs  errors %d  %s  p99 before %.2fms peak %.2fms", f.Spec, f.Instance, f.AtS, f.RestoredS, f.Errors, rec, f.BaselineP99Ms, f.PeakP99Ms)
		if f.Error != "" {
			fmt.Fprintf(w, "  ERROR %s", f.Error)
		}
		fmt.Fprintln(w)
	}
}

// StoreFault is what a fault on a node of a started Aerospike cluster
// (loadgen local --store asd --fault kill:asd1:AT:FOR) did, beside its
// Fault entry. Times are seconds into the measured window.
type StoreFault struct {
	Spec string  `json:"spec"`
	Node string  `json:"node"` // "asd", or "asd1" in a cluster
	AtS  float64 `json:"at_s"`
	// RestoredS is when the node was back: restarted and in the cluster
	// (kill), or continued (stop).
	RestoredS float64 `json:"restored_s"`
	// ErrorsDuringFault counts failed requests from the injection until
	// the node was back; ErrorsAfter from then to the end of the window.
	ErrorsDuringFault int64 `json:"errors_during_fault"`
	ErrorsAfter       int64 `json:"errors_after"`
	// RecoverS is the time from the injection to the start of the first
	// second with no errors after which no second of the window had
	// errors (0: none at all); -1 = errors until the window ended.
	RecoverS float64 `json:"recover_s"`
	// MigrationsMax is the most partitions the cluster had left to
	// migrate (info migrate_partitions_remaining, summed over the nodes
	// that answered) in MigrationSamples samples, one a second from the
	// injection until the node was back and the count was 0 for 3
	// samples (or the run ended); MigrationsSettledS is when that was
	// (-1: not before the run ended).
	MigrationsMax      int64   `json:"migrations_max"`
	MigrationSamples   int     `json:"migration_samples"`
	MigrationsSettledS float64 `json:"migrations_settled_s"`
	Error              string  `json:"error,omitempty"`
}

// writeStoreFaults is the text block of the store faults.
func (r *Result) writeStoreFaults(w io.Writer) {
	if len(r.StoreFaults) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstore faults:\n")
	for _, f := range r.StoreFaults {
		rec := "errors until the end"
		if f.RecoverS >= 0 {
			rec = fmt.Sprintf("error-free from %.0fs after", f.RecoverS)
		}
		settled := "not settled"
		if f.MigrationsSettledS >= 0 {
			settled = fmt.Sprintf("settled at %.1fs", f.MigrationsSettledS)
		}
		fmt.Fprintf(w, "  %-24s %-5s at %5.1fs back %5.1fs  errors %d during, %d after  %s  migrations max %d (%d samples, %s)",
			f.Spec, f.Node, f.AtS, f.RestoredS, f.ErrorsDuringFault, f.ErrorsAfter, rec, f.MigrationsMax, f.MigrationSamples, settled)
		if f.Error != "" {
			fmt.Fprintf(w, "  ERROR %s", f.Error)
		}
		fmt.Fprintln(w)
	}
}
