// Command pause is the testbed's sandbox ("pause") container: the process
// that holds a pod's namespaces. Like the Kubernetes pause it blocks until
// SIGINT or SIGTERM and then exits 0, and it reaps the zombie children it
// inherits (as PID 1 of a pod sharing its PID namespace) whenever SIGCHLD
// arrives. `pause -v` prints its version. It is built static and is the
// only file of the pause image (cluster/image).
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set by the build: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-v" || args[0] == "--version") {
		fmt.Fprintln(stdout, "pause", version)
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "pause: unexpected argument %q (usage: pause [-v])\n", args[0])
		return 2
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// After Notify, so that a reader of this line knows SIGTERM is handled.
	if os.Getpid() != 1 {
		fmt.Fprintln(stderr, "pause: warning: not PID 1; reaping only the children it inherits")
	}
	// Children that ended before Notify sent no signal we saw.
	reap()
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(stderr, "pause: shutting down, got %v\n", s)
		return 0
	}
	return 0
}

// reap collects every child that has exited, without blocking. Signals
// coalesce, so one SIGCHLD may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
