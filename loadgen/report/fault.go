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
