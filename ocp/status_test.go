package ocp

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/peer"
)

func TestStatusFor(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("cannot call abm: %w", fasthttp.ErrNoFreeConns), 503},
		{&peer.StatusError{Code: 503}, 503},
		{fmt.Errorf("x: %w", peer.ErrNoEndpoints), 503},
		{context.DeadlineExceeded, 504},
		{&peer.StatusError{Code: 500}, 502},
		{errors.New("boom"), 502},
	}
	for _, tt := range tests {
		if got := statusFor(tt.err); got != tt.want {
			t.Errorf("statusFor(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
