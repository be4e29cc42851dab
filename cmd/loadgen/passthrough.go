package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/ocp"
)

// serviceArgs is the value of --cgw-args, --ocp-args or --abm-args: extra
// flags for one CHF service, parsed with that service's own flag set, so
// that loadgen sees a flag however it is spelt (-tariff x, --tariff x,
// --tariff=x) and never mistakes a flag's value or a longer flag's name
// for it.
type serviceArgs struct {
	args []string        // as given, passed on unchanged
	set  map[string]bool // the flags args set
}

// serviceFlags registers the flags of a CHF service on fs, with the
// service's defaults (the flags `chf <service>` parses).
var serviceFlags = map[string]func(fs *flag.FlagSet){
	"cgw": func(fs *flag.FlagSet) { c := cgw.DefaultServiceConfig(); c.RegisterFlags(fs) },
	"ocp": func(fs *flag.FlagSet) { c := ocp.DefaultServiceConfig(); c.RegisterFlags(fs) },
	"abm": func(fs *flag.FlagSet) { c := abm.DefaultServiceConfig(); c.RegisterFlags(fs) },
}

// parseServiceArgs parses s, the space-separated extra flags of service
// (cgw, ocp or abm), as `chf <service>` would; a flag the service does not
// have, a bad value or a positional argument is a usage error naming
// --<service>-args.
func parseServiceArgs(service, s string) (serviceArgs, error) {
	register, ok := serviceFlags[service]
	if !ok {
		panic("BUG: no flags known for service " + service)
	}
	args := strings.Fields(s)
	fs := flag.NewFlagSet("chf "+service, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	register(fs)
	if err := fs.Parse(args); err != nil {
		return serviceArgs{}, usageError{fmt.Errorf("invalid --%s-args: chf %s: %w", service, service, err)}
	}
	if fs.NArg() > 0 {
		return serviceArgs{}, usageError{fmt.Errorf("invalid --%s-args: chf %s takes flags only, got %q", service, service, fs.Arg(0))}
	}
	return serviceArgs{args: args, set: setFlags(fs)}, nil
}

// has reports whether the args set the flag name.
func (a serviceArgs) has(name string) bool { return a.set[name] }

// with returns a copy of the args with extra flags appended (a later
// flag wins over an earlier one, as in the flag package).
func (a serviceArgs) with(extra ...string) []string {
	return append(append([]string(nil), a.args...), extra...)
}
