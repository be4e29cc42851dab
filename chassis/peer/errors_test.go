package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestErrorKindAndOverload(t *testing.T) {
	tests := []struct {
		err      error
		kind     string
		overload bool
	}{
		{fmt.Errorf("cannot call ocp: %w", fasthttp.ErrNoFreeConns), "pool exhausted", true},
		{fmt.Errorf("cannot call ocp: %w", fasthttp.ErrTimeout), "timeout", false},
		{&StatusError{Code: 503}, "status Service Unavailable", true},
		{&StatusError{Code: 502}, "status Bad Gateway", false},
		{context.Canceled, "other", false},
		{errors.New("x"), "other", false},
	}
	for _, tt := range tests {
		if got := ErrorKind(tt.err); got != tt.kind {
			t.Errorf("ErrorKind(%v) = %q, want %q", tt.err, got, tt.kind)
		}
		if got := IsOverload(tt.err); got != tt.overload {
			t.Errorf("IsOverload(%v) = %v, want %v", tt.err, got, tt.overload)
		}
	}
}
