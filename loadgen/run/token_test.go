package run

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/ocp"
)

// guardedCHF runs the real charging core in process behind both CGW
// fronts, the HTTP one with an operator token, which guards the balance
// inquiry.
func guardedCHF(t *testing.T, count int, balance int64, token string) (httpAddr, gyAddr string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl := aslitetest.Start(t)
	o := options("")
	if _, err := provision.Run(context.Background(), cl, provision.Config{First: o.Scenario.Subscribers.First, Count: count, Balance: balance, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	core := ocp.NewProcessor(nil, abm.New(cl, abm.Config{Logger: quiet}))
	return serveFronts(t, core, cgw.HandlerConfig{OperatorToken: token})
}

// A CGW with an operator token guards the balance inquiry: over every
// Nchf transport (and Gy's balance reader) the audit, and the scenario's
// balance inquiries, pass with the token; without it, or with another
// one, the run fails at its first balance read with an error naming
// --operator-token-file.
func TestAuditThroughOperatorToken(t *testing.T) {
	const token = "s3cret-operator-token-0123456789"
	const count, balance = 200, 1_000_000
	httpAddr, gyAddr := guardedCHF(t, count, balance, token)
	for _, proto := range []string{"h2c", "h2c-async", "h2c-std", "http1", "gy"} {
		opts := func(tok string) Options {
			o := options(httpAddr)
			o.Scenario.Subscribers.Count = count
			o.Scenario.Phases.Duration = o.Scenario.Phases.Duration / 2
			o.Proto, o.Audit, o.CPU, o.OperatorToken = proto, AuditFull, nil, tok
			if proto == "gy" {
				o.Targets, o.Conns, o.BalanceTargets = []string{gyAddr}, 2, []string{httpAddr}
			}
			return o
		}
		t.Run(proto, func(t *testing.T) {
			res, err := execute(t, opts(token))
			if err != nil {
				t.Fatal(err)
			}
			if a := res.Audit; !a.OK || a.Skipped || a.Checked == 0 || a.Charged == 0 {
				t.Fatalf("audit %+v", a)
			}
			if res.Errors != 0 || res.Transactions == 0 {
				t.Fatalf("%d transactions, %d errors %v", res.Transactions, res.Errors, res.ErrorClasses)
			}
		})
		for _, c := range []struct{ name, token, want string }{
			{"no token", "", "give the load generator the same token with --operator-token-file"},
			{"wrong token", "another-token-of-32-characters!!", "refused the operator token sent; --operator-token-file"},
		} {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				t0 := time.Now()
				_, err := execute(t, opts(c.token))
				if !errors.Is(err, nchf.ErrUnauthorized) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want nchf.ErrUnauthorized saying %q", err, c.want)
				}
				// Refused once is enough: the audit does not retry it
				// or read the rest of the range.
				if d := time.Since(t0); d > 5*time.Second {
					t.Fatalf("the refusal took %v", d)
				}
			})
		}
	}
}
