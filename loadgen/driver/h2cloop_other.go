//go:build !linux || !(amd64 || arm64)

package driver

// NewLoop implements Looper: event loops need Linux (epoll); elsewhere
// callers use the connections' goroutines (Async).
func (d *h2cDriver) NewLoop() (Loop, error) { return nil, ErrNoLoop }
