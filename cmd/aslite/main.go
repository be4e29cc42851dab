// Command aslite is the embedded Aerospike-protocol store on its own: the
// same service, flags and CHF_* environment as `chf aslite`, in a binary
// that does not link client-go (chf does, for its cgw and ocp commands'
// --discovery=kubernetes). Use it where only the store runs: a store pod,
// a lab node, a test.
//
// Exit codes: 0 success; 1 error; 2 usage (bad flags or values).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/chf-testbed/testbed/abm/aslite/aslitecmd"
	"github.com/chf-testbed/testbed/chassis/service"
)

// version is set by the build: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println("aslite", version)
		return
	}
	cfg := aslitecmd.DefaultServiceConfig()
	err := service.RunCommand("aslite", "aslite", aslitecmd.About, &cfg, os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, service.ErrUsage):
		fmt.Fprintf(os.Stderr, "aslite: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "aslite: %v\n", err)
		os.Exit(1)
	}
}
