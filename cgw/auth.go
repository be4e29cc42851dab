package cgw

import (
	"errors"
	"net/http"

	"github.com/chf-testbed/testbed/chassis/oauth2"
	"github.com/chf-testbed/testbed/chf"
)

// denial is a pre-encoded answer to a request refused by the access token
// check (RFC 6750: 401 with WWW-Authenticate for a missing or invalid
// token, 403 for one whose scope does not grant Nchf).
type denial struct {
	status int
	www    string
	body   []byte
}

type denials struct{ missing, invalid, scope denial }

func newDenials() *denials {
	mk := func(status int, cause, detail, www string) denial {
		return denial{status: status, www: www, body: chf.AppendProblemDetails(nil, &chf.Problem{
			Status: status, Title: http.StatusText(status), Cause: cause, Detail: detail,
		})}
	}
	const realm = `Bearer realm="nchf"`
	return &denials{
		missing: mk(http.StatusUnauthorized, "", "an OAuth2 access token is required (Authorization: Bearer)", realm),
		invalid: mk(http.StatusUnauthorized, "", "the OAuth2 access token is invalid or expired", realm+`, error="invalid_token"`),
		scope: mk(http.StatusForbidden, "", "the OAuth2 access token does not grant scope "+oauth2.ScopeConvergedCharging,
			realm+`, error="insufficient_scope", scope="`+oauth2.ScopeConvergedCharging+`"`),
	}
}

// authorizeToken checks the OAuth2 access token in an Authorization
// header (nil when the check is off or the token is good).
func (h *Handler) authorizeToken(authz []byte) *denial {
	if h.tokens == nil {
		return nil
	}
	err := h.tokens.Check(authz)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, oauth2.ErrMissing):
		return &h.denials.missing
	case errors.Is(err, oauth2.ErrScope):
		return &h.denials.scope
	default:
		return &h.denials.invalid
	}
}
