// Package probe answers the health and readiness probes (/healthz,
// /readyz) one way for every front that serves them: the chassis server
// and the CGW's HTTP/2 front. It only computes the answers; the fronts
// write them.
package probe

import (
	"context"
	"net/http"
	"time"
)

// ContentType is the content type of the probes' answers.
const ContentType = "text/plain; charset=utf-8"

// Healthy is the body of /healthz: the process serves.
const Healthy = "ok\n"

// ReadyTimeout bounds one readiness check.
const ReadyTimeout = 2 * time.Second

// Ready returns the status and body of /readyz: 503 "shutting down" while
// the server drains (without asking check), 503 with check's error when
// it fails within ReadyTimeout, 200 "ready" otherwise (a nil check is
// always ready). It is safe for concurrent use when check is.
func Ready(draining bool, check func(context.Context) error) (status int, body string) {
	if draining {
		return http.StatusServiceUnavailable, "shutting down\n"
	}
	if check != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
		err := check(ctx)
		cancel()
		if err != nil {
			return http.StatusServiceUnavailable, "not ready: " + err.Error() + "\n"
		}
	}
	return http.StatusOK, "ready\n"
}
