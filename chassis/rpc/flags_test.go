package rpc

import (
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/chassis/batcher"
)

func TestValidateBatch(t *testing.T) {
	for _, c := range []struct {
		inflight, items int
		want            string // "" = accepted
	}{
		{batcher.DefaultInFlight, MaxBatch, ""},
		{1, 1, ""},
		{-1, 64, ""},
		{0, 64, "--batch-inflight 0"},
		{-2, 64, "--batch-inflight -2"},
		{MaxBatch + 1, 64, "--batch-inflight"},
		{1_000_000_000, 64, "--batch-inflight 1000000000"},
		{4, 0, "--batch-max 0"},
		{4, MaxBatch + 1, "--batch-max"},
	} {
		err := ValidateBatch(batcher.Config{MaxInFlight: c.inflight, MaxItems: c.items})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("inflight %d items %d refused: %v", c.inflight, c.items, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("inflight %d items %d: %v, want an error naming %q", c.inflight, c.items, err, c.want)
		}
	}
}
