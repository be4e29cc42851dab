package moneycheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/loadgen/audit"
)

// The checker's own minimal Nchf and operator API client: plain net/http
// over HTTP/1.1 and HTTP/2 cleartext with prior knowledge (x/net/http2),
// nothing of the load engine, so that a bug there cannot hide one here.

// Paths (cgw/README.md; not imported from the CHF).
const (
	pathNchf     = "/nchf-convergedcharging/v3/chargingdata"
	pathAccounts = "/chf/v1/accounts/"
	nfName       = "6f2c1d7e-5b1a-4c3e-9a4f-1e0d2c3b4a59"
)

// attemptTimeout bounds one send: above the CGW's 2 s deadline.
const attemptTimeout = 3 * time.Second

type client struct {
	base   string // http://host:port
	h1, h2 *http.Client
	tariff *audit.Tariff
	t0     time.Time // invocationTimeStamp = t0 + Op.Stamp
}

func newClient(addr string, tariff *audit.Tariff, t0 time.Time) *client {
	h2t := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		ReadIdleTimeout: time.Second,
		PingTimeout:     time.Second,
	}
	h1t := &http.Transport{MaxIdleConnsPerHost: 16, ForceAttemptHTTP2: false, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
	return &client{base: "http://" + addr, h1: &http.Client{Transport: h1t}, h2: &http.Client{Transport: h2t}, tariff: tariff, t0: t0}
}

func (c *client) close() {
	c.h1.CloseIdleConnections()
	c.h2.CloseIdleConnections()
}

// request is an operation ready to send: the same bytes on every try
// (bodyRetry flags the retransmission).
type request struct {
	method, url     string
	body, bodyRetry []byte
	operator        bool
	idemKey         string // Idempotency-Key (top-ups)
}

// build makes the request of op on the account supi; ref is the session's
// ChargingDataRef for an update or release.
func (c *client) build(op *Op, supi, ref string) request {
	switch op.Kind {
	case KindBalance:
		return request{method: http.MethodGet, url: c.base + pathAccounts + supi}
	case KindTopUp:
		var b strings.Builder
		fmt.Fprintf(&b, `{"amount":%d`, op.Amount)
		if op.Bucket != nil {
			fmt.Fprintf(&b, `,"bucket":{"service":%q,"units":%d}`, op.Bucket.Service, op.Bucket.Units)
		}
		b.WriteString("}")
		return request{method: http.MethodPost, url: c.base + pathAccounts + supi + "/topup", body: []byte(b.String()), operator: true,
			idemKey: "moneycheck-" + strconv.Itoa(op.ID)}
	case KindAbort:
		return request{method: http.MethodPost, url: c.base + pathAccounts + supi + "/abort", operator: true}
	case KindUnbar:
		return request{method: http.MethodPost, url: c.base + pathAccounts + supi + "/unbar", operator: true}
	}
	url := c.base + pathNchf
	switch op.Kind {
	case KindUpdate:
		url += "/" + ref + "/update"
	case KindRelease:
		url += "/" + ref + "/release"
	}
	return request{method: http.MethodPost, url: url, body: c.nchfBody(op, supi, op.Retrans), bodyRetry: c.nchfBody(op, supi, true)}
}

func (c *client) nchfBody(op *Op, supi string, retrans bool) []byte {
	var b strings.Builder
	b.WriteString(`{"nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"` + nfName + `"}`)
	b.WriteString(`,"invocationTimeStamp":"` + c.t0.Add(time.Duration(op.Stamp)).UTC().Format(time.RFC3339Nano) + `"`)
	b.WriteString(`,"invocationSequenceNumber":` + strconv.FormatUint(uint64(op.Seq), 10))
	b.WriteString(`,"subscriberIdentifier":"` + supi + `"`)
	if retrans {
		b.WriteString(`,"retransmissionIndicator":true`)
	}
	if op.Kind == KindEvent {
		b.WriteString(`,"oneTimeEvent":true`)
		if op.EventType != "" {
			b.WriteString(`,"oneTimeEventType":"` + op.EventType + `"`)
		}
	}
	if len(op.Lines) > 0 {
		b.WriteString(`,"multipleUnitUsage":[`)
		for i, l := range op.Lines {
			if i > 0 {
				b.WriteString(",")
			}
			field := "serviceSpecificUnits"
			if r, ok := c.tariff.Rating(l.RG); ok {
				switch r.Service {
				case "data":
					field = "totalVolume"
				case "voice":
					field = "time"
				}
			}
			fmt.Fprintf(&b, `{"ratingGroup":%d`, l.RG)
			if l.Request {
				if l.Requested == 0 {
					b.WriteString(`,"requestedUnit":{}`)
				} else {
					fmt.Fprintf(&b, `,"requestedUnit":{%q:%d}`, field, l.Requested)
				}
			}
			if l.Used > 0 || l.Offline || l.Final || !l.Request {
				fmt.Fprintf(&b, `,"usedUnitContainer":[{"localSequenceNumber":1,%q:%d`, field, l.Used)
				if l.Offline {
					b.WriteString(`,"quotaManagementIndicator":"OFFLINE_CHARGING"`)
				}
				if l.Final {
					b.WriteString(`,"triggers":[{"triggerType":"FINAL","triggerCategory":"IMMEDIATE_REPORT"}]`)
				}
				b.WriteString("}]")
			}
			b.WriteString("}")
		}
		b.WriteString("]")
	}
	b.WriteString("}")
	return []byte(b.String())
}

// send makes one try of r (retry: the body flagged as a retransmission)
// over HTTP/2 or HTTP/1.1.
func (c *client) send(ctx context.Context, r *request, retry, h2 bool) Answer {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	body := r.body
	if retry && r.bodyRetry != nil {
		body = r.bodyRetry
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, rd)
	if err != nil {
		return Answer{InDoubt: true, Err: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.idemKey != "" {
		req.Header.Set("Idempotency-Key", r.idemKey)
	}
	hc := c.h1
	if h2 {
		hc = c.h2
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{InDoubt: true, Err: shortErr(err)}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Answer{InDoubt: true, Err: "cannot read the answer: " + shortErr(err)}
	}
	if resp.StatusCode >= 500 {
		return Answer{InDoubt: true, Status: resp.StatusCode, Err: fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(rb)))}
	}
	return parseAnswer(resp, rb)
}

func shortErr(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return err.Error()
}

type wireAnswer struct {
	Cause string `json:"cause"`
	MUI   []struct {
		ResultCode  string            `json:"resultCode"`
		RatingGroup uint32            `json:"ratingGroup"`
		GrantedUnit map[string]uint64 `json:"grantedUnit"`
		FUI         json.RawMessage   `json:"finalUnitIndication"`
	} `json:"multipleUnitInformation"`
	Balance     *int64 `json:"balance"`
	Reserved    int64  `json:"reserved"`
	Available   int64  `json:"available"`
	Debited     int64  `json:"debited"`
	Overage     int64  `json:"overage"`
	Offline     int64  `json:"offline"`
	Credited    int64  `json:"credited"`
	CreditLimit int64  `json:"creditLimit"`
	Barred      bool   `json:"barred"`
	Buckets     []struct {
		Service     string `json:"service"`
		Units, Held uint64
	} `json:"buckets"`
	Sessions *int `json:"sessions"`
}

func parseAnswer(resp *http.Response, body []byte) Answer {
	a := Answer{Status: resp.StatusCode}
	if h := resp.Header.Get("X-Chf-Charged"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return Answer{Status: resp.StatusCode, Err: "bad X-Chf-Charged " + strconv.Quote(h)}
		}
		a.Charged, a.HasCharged = n, true
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		a.Ref = loc[strings.LastIndexByte(loc, '/')+1:]
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return a
	}
	var w wireAnswer
	if err := json.Unmarshal(body, &w); err != nil {
		a.Err = "cannot decode the answer: " + err.Error()
		return a
	}
	a.Cause = w.Cause
	for _, l := range w.MUI {
		var units uint64
		for _, v := range l.GrantedUnit {
			units += v
		}
		a.Lines = append(a.Lines, LineAnswer{RG: l.RatingGroup, Result: l.ResultCode, Units: units, Final: len(l.FUI) > 0})
	}
	if w.Balance != nil {
		v := AccountView{Balance: *w.Balance, Reserved: w.Reserved, Available: w.Available, Debited: w.Debited, Overage: w.Overage,
			Offline: w.Offline, Credited: w.Credited, CreditLimit: w.CreditLimit, Barred: w.Barred}
		// Held units are reported on the first bucket of their service
		// (cgw/README.md); held on another is counted apart.
		var seen [nsvc]bool
		for _, b := range w.Buckets {
			if k := serviceIndex(b.Service); k >= 0 {
				v.Buckets[k].Units += b.Units
				if seen[k] {
					v.HeldElsewhere += b.Held
				} else {
					v.Buckets[k].Held = b.Held
				}
				seen[k] = true
			}
		}
		a.Account = &v
	}
	if w.Sessions != nil {
		a.Sessions, a.HasSessions = *w.Sessions, true
	}
	return a
}
