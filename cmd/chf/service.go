package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
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

// batchFlags registers --batch-inflight and --batch-max, how calls to peer
// are merged into batches (chassis.Batcher); check validates them after
// parsing.
func batchFlags(fs *flag.FlagSet, peer string) (cfg *chassis.BatchConfig, check func() error) {
	cfg = new(chassis.BatchConfig)
	fs.IntVar(&cfg.MaxInFlight, "batch-inflight", chassis.DefaultBatchInFlight,
		"batches in flight to the "+peer+" at once; calls arriving while that many are out leave together in the next batch; -1 = no batching")
	fs.IntVar(&cfg.MaxItems, "batch-max", chassis.DefaultBatchItems, fmt.Sprintf("most requests in one batch to the %s (1..%d)", peer, chf.MaxBatch))
	return cfg, func() error {
		if cfg.MaxInFlight == 0 || cfg.MaxInFlight < -1 {
			return fmt.Errorf("cannot use --batch-inflight %d: want a positive number, or -1 for no batching", cfg.MaxInFlight)
		}
		if cfg.MaxItems < 1 || cfg.MaxItems > chf.MaxBatch {
			return fmt.Errorf("cannot use --batch-max %d: want 1..%d", cfg.MaxItems, chf.MaxBatch)
		}
		return nil
	}
}
