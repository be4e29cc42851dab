package rpc

import (
	"flag"
	"fmt"

	"github.com/chf-testbed/testbed/chassis/batcher"
)

// RegisterBatchFlags registers --batch-inflight and --batch-max, how the
// calls to peer are merged into batches (batcher.Batcher), on fs, with
// cfg's values as defaults.
func RegisterBatchFlags(fs *flag.FlagSet, cfg *batcher.Config, peer string) {
	fs.IntVar(&cfg.MaxInFlight, "batch-inflight", cfg.MaxInFlight,
		"most batches in flight to the "+peer+" at once: a full batch (--batch-max) leaves while fewer are out, a partial one only when none is, so more than one is out only while more than a full batch waits; 1 = one batch at a time (pipelining off); -1 = no batching; at most "+fmt.Sprint(MaxBatch))
	fs.IntVar(&cfg.MaxItems, "batch-max", cfg.MaxItems, fmt.Sprintf("most requests in one batch to the %s (1..%d)", peer, MaxBatch))
}

// ValidateBatch checks the values of the batch flags.
func ValidateBatch(cfg batcher.Config) error {
	if cfg.MaxInFlight == 0 || cfg.MaxInFlight < -1 || cfg.MaxInFlight > MaxBatch {
		return fmt.Errorf("cannot use --batch-inflight %d: want 1..%d, or -1 for no batching", cfg.MaxInFlight, MaxBatch)
	}
	if cfg.MaxItems < 1 || cfg.MaxItems > MaxBatch {
		return fmt.Errorf("cannot use --batch-max %d: want 1..%d", cfg.MaxItems, MaxBatch)
	}
	return nil
}
