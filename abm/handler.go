package abm

import (
	"context"
	"errors"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// Handler returns the fasthttp handler serving abmclient.ApplyPath and
// abmclient.ApplyBatchPath on s. Other paths answer 404, other methods 405.
func (s *Service) Handler() fasthttp.RequestHandler {
	return rpc.BatchHandler[chf.ApplyRequest, chf.ChargeResponse](abmclient.ApplyPath, abmclient.ApplyBatchPath, "apply", s.Apply, s.ApplyBatch, statusFor)
}

// statusFor maps an Apply error to the HTTP status the ABM answers.
func statusFor(err error) int {
	var aerr as.Error
	switch {
	case errors.Is(err, ErrContention):
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &aerr) && aerr.Matches(types.TIMEOUT):
		return fasthttp.StatusGatewayTimeout
	}
	return fasthttp.StatusInternalServerError
}
