package nchf

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/nchfspec"
	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

func specValidator(t *testing.T) *nchfspec.Validator {
	t.Helper()
	v, err := nchfspec.Load("")
	if errors.Is(err, nchfspec.ErrMissing) && os.Getenv("CI") != "true" {
		t.Logf("not validating against the spec: %v", err)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNotifyServer: the notifyUri a create carries reaches the driver's
// notify server, which hands the CHF's notifications (posted by the
// CHF's own cgw.Notifier) to the sink as notices for the flow and
// answers 204; a sink without room makes it answer 503, which the CHF
// retries, and a path naming no flow 404, which it does not. Every
// exchange conforms to the spec.
func TestNotifyServer(t *testing.T) {
	d, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, NotifyListen: "127.0.0.1:0", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v := specValidator(t)

	// The create's body names the notifyUri of its flow.
	var m message
	d.build(&m, &driver.Charge{Op: driver.ChargeCreate, Flow: 42, SUPI: []byte("imsi-001010000000001"), RatingGroup: 10,
		Request: true, Requested: chf.Units{TotalVolume: 1000}, Invoked: time.Now()})
	var r chf.NchfRequest
	var dec chf.NchfDecoder
	if err := dec.Decode(m.body, &r); err != nil {
		t.Fatal(err)
	}
	uri := string(r.NotifyURI)
	if uri != d.NotifyBase()+"42" || !strings.HasPrefix(uri, "http://127.0.0.1:") {
		t.Fatalf("notifyUri %q (base %q)", uri, d.NotifyBase())
	}
	if v != nil {
		if err := v.ValidateRequest("POST", PathCreate, m.body); err != nil {
			t.Fatalf("create with notifyUri: %v", err)
		}
	}
	// An update carries none.
	d.build(&m, &driver.Charge{Op: driver.ChargeUpdate, Flow: 42, Session: []byte("ref"), SUPI: []byte("imsi-1"), RatingGroup: 10})
	if strings.Contains(string(m.body), "notifyUri") {
		t.Fatalf("update body %s", m.body)
	}

	got := make(chan driver.Notice, 8)
	var room atomic.Bool
	room.Store(true)
	if !d.SetNoticeSink(func(n driver.Notice) bool {
		if !room.Load() {
			return false
		}
		got <- n
		return true
	}) {
		t.Fatal("a driver with a notify listener delivers no notices")
	}
	n := cgw.NewNotifier(cgw.NotifierConfig{Backoff: time.Millisecond, Timeout: time.Second})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		typ   string
		abort bool
	}{{cgw.NotifyReauthorization, false}, {cgw.NotifyAbortCharging, true}, {cgw.NotifyReauthorization, false}} {
		before := time.Now()
		attempts, err := n.Notify(ctx, uri, c.typ)
		if err != nil || attempts != 1 {
			t.Fatalf("%s: %d attempts, %v", c.typ, attempts, err)
		}
		t.Logf("%s answered in %v", c.typ, time.Since(before))
		select {
		case x := <-got:
			if x.Flow != 42 || x.Abort != c.abort || x.Received.Before(before) {
				t.Fatalf("%s: notice %+v", c.typ, x)
			}
		default:
			t.Fatalf("%s: no notice", c.typ)
		}
		if v != nil {
			if err := v.ValidateNotify(cgw.AppendNotifyRequest(nil, c.typ), 204, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	room.Store(false)
	if attempts, err := n.Notify(ctx, uri, cgw.NotifyReauthorization); attempts != 3 || !errors.Is(err, cgw.ErrNotifyRefused) {
		t.Fatalf("no room: %d attempts, %v", attempts, err)
	}
	if attempts, err := n.Notify(ctx, d.NotifyBase()+"x", cgw.NotifyReauthorization); attempts != 1 || err == nil {
		t.Fatalf("no flow: %d attempts, %v", attempts, err)
	}
	if v != nil {
		for _, st := range []int{503, 404, 400} {
			if err := v.ValidateNotify(cgw.AppendNotifyRequest(nil, cgw.NotifyAbortCharging), st, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A body that is no notification: 400.
	c, err := h2c.Dial(ctx, strings.TrimPrefix(strings.TrimSuffix(d.NotifyBase(), PathNotify), "http://"), &h2c.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var resp h2c.ClientResponse
	tmpl := h2c.NewRequestTemplate("POST", "loadgen", "application/json")
	if err := c.Do(ctx, &h2c.ClientRequest{Template: tmpl, Path: []byte(PathNotify + "7"), Body: []byte(`{"notificationType":"OTHER"}`)}, &resp); err != nil || resp.Status != 400 {
		t.Fatalf("malformed: %d %v", resp.Status, err)
	}
	if d.notify.malformed.Load() != 1 {
		t.Fatalf("malformed counted %d", d.notify.malformed.Load())
	}
}

func TestParseNotification(t *testing.T) {
	f := func(body string, ok, abort bool) {
		t.Helper()
		n, got := parseNotification([]byte(body))
		if got != ok || n.Abort != abort {
			t.Fatalf("%s: ok %v abort %v", body, got, n.Abort)
		}
	}
	f(`{"notificationType":"REAUTHORIZATION","reauthorizationDetails":[{}]}`, true, false)
	f(`{"notificationType" : "ABORT_CHARGING"}`, true, true)
	f(`{"notificationType":"OTHER"}`, false, false)
	f(`{}`, false, false)
	f(`{"notificationType"}`, false, false)
	f(``, false, false)
}

// TestNotifyListenUnroutable: a notify listener on an unspecified address
// cannot be advertised as a notifyUri.
func TestNotifyListenUnroutable(t *testing.T) {
	_, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, NotifyListen: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "give an address the CHF can reach") {
		t.Fatalf("err %v", err)
	}
	if _, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, NotifyListen: "127.0.0.1:" + strconv.Itoa(-1)}); err == nil {
		t.Fatal("a bad listen address was accepted")
	}
}

func FuzzParseNotification(f *testing.F) {
	f.Add([]byte(`{"notificationType":"REAUTHORIZATION"}`))
	f.Add([]byte(`{"notificationType":"ABORT_CHARGING"}`))
	f.Fuzz(func(t *testing.T, b []byte) { parseNotification(b) })
}

// TestReauthorizedUpdateConforms: the update answering a re-authorisation
// names the trigger, decodes with the CHF's decoder and conforms.
func TestReauthorizedUpdateConforms(t *testing.T) {
	d, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var m message
	d.build(&m, &driver.Charge{Op: driver.ChargeUpdate, Session: []byte("ref"), SUPI: []byte("imsi-001010000000001"), Seq: 2, RatingGroup: 10,
		Request: true, Requested: chf.Units{TotalVolume: 1000}, Reauthorized: true, Offline: true, Invoked: time.Now()})
	var r chf.NchfRequest
	var dec chf.NchfDecoder
	if err := dec.Decode(m.body, &r); err != nil || len(r.Lines) != 1 || !r.Lines[0].Offline || r.Lines[0].Reported&chf.TriggerForcedReauth == 0 {
		t.Fatalf("%s: %v %+v", m.body, err, r.Lines)
	}
	if v := specValidator(t); v != nil {
		if err := v.ValidateRequest("POST", "/nchf-convergedcharging/v3/chargingdata/ref/update", m.body); err != nil {
			t.Fatalf("%s: %v", m.body, err)
		}
	}
}
