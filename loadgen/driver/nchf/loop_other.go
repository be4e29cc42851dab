//go:build !linux || !(amd64 || arm64)

package nchf

import (
	"errors"

	"github.com/chf-testbed/testbed/loadgen/driver"
)

// errNoLoop: event loops need Linux (epoll); elsewhere h2c workers use a
// driver.Pool over the connections' goroutines.
var errNoLoop = errors.New("nchf: no event loop on this platform")

func (d *Driver) newLoop() (driver.Worker, error) { return nil, errNoLoop }
