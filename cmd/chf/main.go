// Command chf is the system under test: one binary with a subcommand per
// service (cgw, ocp, abm), the embedded Aerospike-protocol store (aslite),
// account provisioning (provision) and a local testbed runner (local).
// Every subcommand's flags are its package's configuration type
// (service.ParseCommand: --help, --check-flags, the CHF_* environment);
// the services run in the chassis' run group (service.Run).
//
// Exit codes: 0 success; 1 error; 2 usage (bad flags or values).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/aslite/aslitecmd"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/chassis/service"
	// The cgw and ocp commands offer --discovery=kubernetes; this import
	// registers it, and is what links client-go into chf.
	_ "github.com/chf-testbed/testbed/chassis/discovery/kubernetes"
	"github.com/chf-testbed/testbed/local"
	"github.com/chf-testbed/testbed/ocp"
)

// command is one subcommand: run receives the arguments after its name.
type command struct {
	name, summary string
	run           func(args []string) error
}

var commands = []command{
	{"abm", "Account Balance Manager: balances, reservations and sessions on Aerospike", func(args []string) error {
		cfg := abm.DefaultServiceConfig()
		return service.Run("abm", abm.About, &cfg, args)
	}},
	{"aslite", "in-memory Aerospike-protocol store (single node) for the ABM", func(args []string) error {
		cfg := aslitecmd.DefaultServiceConfig()
		return service.Run("aslite", aslitecmd.About, &cfg, args)
	}},
	{"cgw", "Charging Gateway: Nchf_ConvergedCharging (h2c + HTTP/1.1), balance inquiry, Diameter Gy", func(args []string) error {
		cfg := cgw.DefaultServiceConfig()
		return service.Run("cgw", cgw.About, &cfg, args)
	}},
	{"local", "run aslite, abm, ocp and cgw as local processes with provisioned accounts", func(args []string) error {
		cfg := local.DefaultCommandConfig()
		if run, err := service.ParseCommand("chf local", local.About, &cfg, args); !run {
			return err
		}
		return cfg.Run()
	}},
	{"ocp", "Online Charging Processor: rating and quota, stateless, calls the ABM", func(args []string) error {
		cfg := ocp.DefaultServiceConfig()
		return service.Run("ocp", ocp.About, &cfg, args)
	}},
	{"provision", "create subscriber accounts with a balance on Aerospike (or aslite)", runProvision},
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: chf <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'chf <command> --help' for the flags of a command.\n")
}

// version is set by the build: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println("chf", version)
		return
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	for _, c := range commands {
		if c.name != os.Args[1] {
			continue
		}
		err := c.run(os.Args[2:])
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return
		case errors.Is(err, service.ErrUsage):
			fmt.Fprintf(os.Stderr, "chf %s: %v\n", c.name, err)
			os.Exit(2)
		default:
			fmt.Fprintf(os.Stderr, "chf %s: %v\n", c.name, err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "chf: unknown command %q\n\n", os.Args[1])
	usage()
	os.Exit(2)
}
