package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// operatorToken is the CGW's operator API token in these tests.
const operatorToken = "e2e-operator-token-0123456789"

// provision overwrites one account with a plan.
func provisionAccounts(t *testing.T, e *env, s string, cfg provision.Config) {
	t.Helper()
	cfg.First, cfg.Count, cfg.Overwrite = s, 1, true
	if cfg.Now == nil {
		cfg.Now = e.clock.now
	}
	if _, err := provision.Run(context.Background(), e.as, cfg, nil); err != nil {
		t.Fatal(err)
	}
}

// topUp posts an operator top-up with the given bearer token ("" = none).
func (c *client) topUp(s, token, body string) (int, bal) {
	c.t.Helper()
	status, b := c.postJSON(cgw.AccountsBase+s+cgw.TopUpSuffix, token, []byte(body))
	var out bal
	if status == 200 {
		if err := json.Unmarshal(b, &out); err != nil {
			c.t.Fatalf("top-up answer %s: %v", b, err)
		}
	}
	return status, out
}

// postJSON posts body as application/json to path with the given bearer
// token ("" = none) and returns the status and the answer's body.
func (c *client) postJSON(path, token string, body []byte) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest("POST", c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestPostpaidAccount: a postpaid account's balance goes below zero down
// to its credit limit, and usage beyond it is overage.
func TestPostpaidAccount(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(2 + i)
			provisionAccounts(t, e, s, provision.Config{Balance: 100, CreditLimit: 1000})
			ref, r := c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`))
			if g := grants(t, r); len(g) != 1 || g[0].GrantedUnit["time"] != 300 || g[0].FUI != nil {
				t.Fatalf("create %s", r.body)
			}
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":20,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"time":300}]}`))
			if g := grants(t, r); r.charged != 300 || g[0].GrantedUnit["time"] != 300 {
				t.Fatalf("update %d %s", r.charged, r.body)
			}
			if b := c.balance(s); b.Balance != -200 || b.CreditLimit != 1000 || b.Reserved != 300 {
				t.Fatalf("after update %+v", b)
			}
			// 900 s used: 800 more can be debited, 100 is overage.
			r = c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":20,"usedUnitContainer":[{"localSequenceNumber":2,"time":900}]}`))
			if r.status != 204 || r.charged != 800 {
				t.Fatalf("release %d %d %s", r.status, r.charged, r.body)
			}
			if b := c.balance(s); b.Balance != -1000 || b.Debited != 1100 || b.Overage != 100 || b.Reserved != 0 {
				t.Fatalf("final %+v", b)
			}
			// At the limit nothing more is granted.
			if r := c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`)); r.status != 403 {
				t.Fatalf("create at the limit: %d %s", r.status, r.body)
			}
		})
	}
}

// TestOfflineCharging: usage reported OFFLINE_CHARGING is rated and
// recorded, never debited, and gets no quota.
func TestOfflineCharging(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(4 + i)
			b0 := c.balance(s)
			ref, r := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5000000,"quotaManagementIndicator":"OFFLINE_CHARGING"}]}`))
			if g := grants(t, r); r.charged != 0 || len(g) != 1 || len(g[0].GrantedUnit) != 0 {
				t.Fatalf("offline create %d %s", r.charged, r.body)
			}
			r = c.do("POST", ref+"/release", req("", 1, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":2500000,"quotaManagementIndicator":"OFFLINE_CHARGING"}]}`))
			if r.status != 204 || r.charged != 0 {
				t.Fatalf("offline release %d %s", r.status, r.body)
			}
			if b := c.balance(s); b.Balance != b0.Balance || b.Offline != 8 || b.Debited != 0 || b.Reserved != 0 {
				t.Fatalf("after offline usage %+v", b)
			}
			// Containers of one rating group all offline or none.
			r = c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":1,"quotaManagementIndicator":"OFFLINE_CHARGING"},{"localSequenceNumber":2,"totalVolume":1}]}`))
			if r.status != 400 || !bytes.Contains(r.body, []byte(`"param":"/multipleUnitUsage/0/usedUnitContainer"`)) {
				t.Fatalf("mixed containers: %d %s", r.status, r.body)
			}
		})
	}
}

// TestBucketsConsumedFirstAndExpire: a data bucket pays grants and usage
// before the balance, the rest is paid in money; an expired bucket pays
// nothing; a top-up (with the operator token) adds money and a bucket.
func TestBucketsConsumedFirstAndExpire(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(6 + i)
			provisionAccounts(t, e, s, provision.Config{Balance: 100, Buckets: []chf.Bucket{{Service: chf.ServiceData, Units: 20_000_000, Expires: 3600}}})
			ref, r := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
			if g := grants(t, r); r.charged != 0 || g[0].GrantedUnit["totalVolume"] != 10_000_000 {
				t.Fatalf("create %s", r.body)
			}
			if b := c.balance(s); b.Reserved != 0 || len(b.Buckets) != 1 || b.Buckets[0].Held != 10_000_000 || b.Buckets[0].Units != 20_000_000 {
				t.Fatalf("after create %+v", b)
			}
			// 15 MB used, all from the bucket; the next 10 MB grant is
			// 5 MB of bucket and 5 MB of money.
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":15000000}]}`))
			if g := grants(t, r); r.charged != 0 || g[0].GrantedUnit["totalVolume"] != 10_000_000 {
				t.Fatalf("update %d %s", r.charged, r.body)
			}
			if b := c.balance(s); b.Reserved != 5 || b.Buckets[0].Units != 5_000_000 || b.Buckets[0].Held != 5_000_000 {
				t.Fatalf("after update %+v", b)
			}
			r = c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":7500000}]}`))
			if r.status != 204 || r.charged != 3 {
				t.Fatalf("release %d %d %s", r.status, r.charged, r.body)
			}
			if b := c.balance(s); b.Balance != 97 || b.Debited != 3 || len(b.Buckets) != 0 {
				t.Fatalf("final %+v", b)
			}

			// Expiry under the injected clock: an hour-long bucket is
			// gone two hours later.
			s2 := supi(16 + i)
			provisionAccounts(t, e, s2, provision.Config{Balance: 100, Buckets: []chf.Bucket{{Service: chf.ServiceVoice, Units: 600, Expires: 3600}}})
			if b := c.balance(s2); len(b.Buckets) != 1 || b.Buckets[0].Units != 600 || b.Buckets[0].Service != "voice" {
				t.Fatalf("provisioned %+v", b)
			}
			e.clock.advance(2 * time.Hour)
			_, r = c.create(req(s2, 0, `{"ratingGroup":20,"requestedUnit":{"time":60}}`))
			if b := c.balance(s2); len(b.Buckets) != 0 || b.Reserved != 60 {
				t.Fatalf("after expiry %+v (%s)", b, r.body)
			}

			// Top-up: refused without the token, then money and a bucket.
			if st, _ := c.topUp(s2, "", `{"amount":500}`); st != 401 {
				t.Fatalf("top-up without token: %d", st)
			}
			if st, _ := c.topUp(s2, "wrong-token-wrong-token", `{"amount":500}`); st != 401 {
				t.Fatalf("top-up with a wrong token: %d", st)
			}
			st, b := c.topUp(s2, operatorToken, `{"amount":500,"bucket":{"service":"voice","units":100,"validity":60}}`)
			if st != 200 || b.Balance != 600 || b.Credited != 500 || len(b.Buckets) != 1 || b.Buckets[0].Units != 100 {
				t.Fatalf("top-up: %d %+v", st, b)
			}
			if st, _ := c.topUp(s2, operatorToken, `{"amount":-1}`); st != 400 {
				t.Fatalf("negative top-up: %d", st)
			}
			_, r = c.create(req(s2, 0, `{"ratingGroup":20,"requestedUnit":{"time":300}}`))
			if b := c.balance(s2); b.Reserved != 60+200 || b.Buckets[0].Held != 100 {
				t.Fatalf("after bucket grant %+v (%s)", b, r.body)
			}
		})
	}
}

// TestGyBucketsAndPostpaid: the same accounts on Gy.
func TestGyBucketsAndPostpaid(t *testing.T) {
	e := startCHF(t)
	c := startGy(t, e)
	cl := clients(t, e)[1]
	provisionAccounts(t, e, supi(8), provision.Config{Balance: 0, CreditLimit: 50, Buckets: []chf.Bucket{{Service: chf.ServiceData, Units: 5_000_000}}})
	sid := c.NewSessionID()
	imsi := imsiOf(8)
	a := gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
	if a.Grants[0].Granted.TotalVolume != 10_000_000 || a.Charged != 0 {
		t.Fatalf("CCA-I %+v", a)
	}
	a = gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestTermination, Number: 1, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 9_000_000}}}}, wire.ResultSuccess)
	if a.Charged != 4 {
		t.Fatalf("CCA-T charged %d", a.Charged)
	}
	if b := cl.balance(supi(8)); b.Balance != -4 || b.Debited != 4 || len(b.Buckets) != 0 {
		t.Fatalf("balance %+v", b)
	}
}
