package main

import (
	"fmt"
	"strings"
)

// serviceArgs is the value of --cgw-args, --ocp-args or --abm-args: extra
// flags for one CHF service, passed on unchanged. loadgen reads which
// flags they set with the flag package's syntax (-name, --name, -name=v,
// --name=v, -name v, --name v), so that it sees a flag however it is
// spelt and never takes a longer flag's name for it. It does not link the
// services to learn their flags (cmd/loadgen stays free of the CHF's
// server packages): a token after a flag is that flag's value unless it
// starts with "-", so a value that starts with "-" must be given as
// --name=value; the service itself checks its flags when it starts.
type serviceArgs struct {
	args []string        // as given, passed on unchanged
	set  map[string]bool // the flags args set
}

// parseServiceArgs reads s, the space-separated extra flags of service
// (cgw, ocp or abm); an argument that is neither a flag nor a flag's value
// is a usage error naming --<service>-args.
func parseServiceArgs(service, s string) (serviceArgs, error) {
	args := strings.Fields(s)
	set := map[string]bool{}
	valueNext := false // the previous token was a flag without "=value"
	for _, a := range args {
		name, isFlag := flagName(a)
		switch {
		case isFlag && name == "":
			return serviceArgs{}, usageError{fmt.Errorf("invalid --%s-args: chf %s: bad flag syntax %q", service, service, a)}
		case isFlag:
			set[name] = true
			valueNext = !strings.Contains(a, "=")
		case valueNext:
			valueNext = false
		default:
			return serviceArgs{}, usageError{fmt.Errorf("invalid --%s-args: chf %s takes flags only, got %q", service, service, a)}
		}
	}
	return serviceArgs{args: args, set: set}, nil
}

// flagName returns the name of a flag token ("-name", "--name[=value]"),
// and false for a token that is not a flag. "-" alone and "---x" are
// flags with an empty name (bad syntax, as in the flag package).
func flagName(a string) (string, bool) {
	if len(a) < 2 || a[0] != '-' {
		return "", false
	}
	n := strings.TrimPrefix(a[1:], "-")
	if n == "" || n[0] == '-' || n[0] == '=' {
		return "", true
	}
	if i := strings.IndexByte(n, '='); i >= 0 {
		n = n[:i]
	}
	return n, true
}

// has reports whether the args set the flag name.
func (a serviceArgs) has(name string) bool { return a.set[name] }

// with returns a copy of the args with extra flags appended (a later
// flag wins over an earlier one, as in the flag package).
func (a serviceArgs) with(extra ...string) []string {
	return append(append([]string(nil), a.args...), extra...)
}
