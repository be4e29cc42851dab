package abm

import (
	"flag"
	"io"
	"testing"
)

// The ABM's --gogc defaults to DefaultGOGC (fewer GC marks, each of which
// stalls the hops before it), not Go's 100, and can be set back to Go's
// default with 0.
func TestGOGCDefault(t *testing.T) {
	c := DefaultServiceConfig()
	fs := flag.NewFlagSet("abm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	f := fs.Lookup("gogc")
	if f == nil || f.DefValue != "400" || c.Runtime.GOGC != DefaultGOGC {
		t.Fatalf("--gogc %+v, config %d: want default %d", f, c.Runtime.GOGC, DefaultGOGC)
	}
	if err := fs.Parse([]string{"--gogc", "0"}); err != nil || c.Runtime.GOGC != 0 {
		t.Fatalf("--gogc 0: %v, GOGC %d", err, c.Runtime.GOGC)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
