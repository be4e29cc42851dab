// Command images builds the testbed's container image archives without a
// container engine (cluster/image; `make images` runs it). `images -h`
// lists the flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/chf-testbed/testbed/cluster/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := image.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
