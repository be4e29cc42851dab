package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/chf-testbed/testbed/chassis"
)

// parseServiceFlags parses a service's flags (with the CHF_* environment
// fallback), refuses positional arguments and validates the flags every
// service has: --listen (host:port) and --log-level, whose level it returns.
func parseServiceFlags(fs *flag.FlagSet, args []string, listen, logLevel *string) (slog.Level, error) {
	var level slog.Level
	if err := chassis.ParseFlags(fs, args); err != nil {
		return level, err
	}
	if fs.NArg() > 0 {
		return level, fmt.Errorf("cannot parse flags: unexpected argument %q", fs.Arg(0))
	}
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return level, fmt.Errorf("cannot parse --log-level: %w", err)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return level, fmt.Errorf("cannot parse --listen %q: %w", *listen, err)
	}
	return level, nil
}
