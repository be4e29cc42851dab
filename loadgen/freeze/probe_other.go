//go:build !linux

package freeze

import (
	"context"
	"fmt"
	"io"
	"os/exec"
)

// Serve says the probe is unavailable: it needs Linux's SCHED_FIFO and
// CPU affinity.
func Serve(_ context.Context, _ io.Reader, out io.Writer) error {
	fmt.Fprintf(out, "unavailable the host probe needs Linux\n")
	return fmt.Errorf("%w: it needs Linux", ErrUnavailable)
}

func setProcAttr(*exec.Cmd) {}
