package driver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chf"
)

// scriptedCore answers every request with the result its SUPI names
// ("imsi-...-<result>"; plain SUPIs succeed) and charges 7 per request.
type scriptedCore struct{}

func (scriptedCore) Charge(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	*resp = chf.ChargeResponse{Currency: "EUR", Balance: 100}
	switch {
	case strings.HasSuffix(req.SUPI, "999"):
		resp.Result = chf.ResultUserUnknown
		return nil
	case strings.HasSuffix(req.SUPI, "998"):
		resp.Lines = []chf.GrantLine{{RatingGroup: 10, Result: chf.ResultQuotaLimitReached}}
		return nil
	}
	if req.Op != chf.OpBalance {
		resp.Charged = 7
	}
	for _, l := range req.Lines {
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Granted: chf.Units{TotalVolume: 1000}, ValidityTime: 60})
	}
	return nil
}

func startDiameter(t *testing.T, addr string) *diameter.Server {
	t.Helper()
	s, err := diameter.NewServer(diameter.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, scriptedCore{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(addr); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGyDriver(t *testing.T) {
	srv := startDiameter(t, "127.0.0.1:0")
	defer func() { srv.Close() }()
	d, err := New(Config{Proto: "gy", Targets: []string{srv.Addr()}, Conns: 2, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, ok := d.(Charging); !ok || d.Targets() != 2 {
		t.Fatalf("driver %T with %d targets", d, d.Targets())
	}
	do := func(target int, c Charge) *Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var resp Response
		if err := d.Do(ctx, &Request{Target: target, Charge: &c}, &resp); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		return &resp
	}
	supi := []byte("imsi-001010000000001")
	create := do(1, Charge{Op: ChargeCreate, SUPI: supi, RatingGroup: 10, Request: true})
	if create.Status != 201 || create.Class != "" || !create.HasCharged || create.Charged != 7 || !strings.HasPrefix(string(create.Location), "lg") {
		t.Fatalf("create: %+v", create)
	}
	sess := append([]byte(nil), create.Location...)
	for _, c := range []struct {
		charge Charge
		status int
		class  string
	}{
		{Charge{Op: ChargeUpdate, SUPI: supi, Session: sess, Seq: 1, RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 5}}, 200, ""},
		{Charge{Op: ChargeRelease, SUPI: supi, Session: sess, Seq: 2, RatingGroup: 10, Used: chf.Units{TotalVolume: 5}}, 204, ""},
		{Charge{Op: ChargeEvent, SUPI: supi, RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}, 201, ""},
		{Charge{Op: ChargeBalance, SUPI: supi}, 200, ""},
		{Charge{Op: ChargeCreate, SUPI: []byte("imsi-001010000000999"), RatingGroup: 10, Request: true}, 404, "gy_5030"},
		{Charge{Op: ChargeCreate, SUPI: []byte("imsi-001010000000998"), RatingGroup: 10, Request: true}, 201, "rg_4012"},
	} {
		r := do(0, c.charge)
		if r.Status != c.status || r.Class != c.class {
			t.Errorf("op %d: status %d class %q, want %d %q", c.charge.Op, r.Status, r.Class, c.status, c.class)
		}
	}

	// Async: the callback fills the response.
	var resp Response
	ch := make(chan error, 1)
	c := Charge{Op: ChargeEvent, SUPI: supi, RatingGroup: 30, Request: true}
	if err := d.(Async).Start(&Request{Charge: &c}, &resp, func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil || resp.Status != 201 || resp.Charged != 7 {
		t.Fatalf("async: %v %+v", err, resp)
	}

	// The server goes away: requests fail as connection errors, and the
	// driver dials again once it is back.
	addr := srv.Addr()
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = d.Do(ctx, &Request{Charge: &c}, &resp)
	cancel()
	if !errors.Is(err, ErrConnection) {
		t.Fatalf("after the server closed: %v", err)
	}
	srv = startDiameter(t, addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = d.Do(ctx, &Request{Charge: &c}, &resp)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not redialed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGyDriverNeedsCharge(t *testing.T) {
	srv := startDiameter(t, "127.0.0.1:0")
	defer srv.Close()
	d, err := New(Config{Proto: "gy", Targets: []string{srv.Addr()}, Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Do(context.Background(), &Request{Method: "GET", Path: []byte("/")}, &Response{}); !errors.Is(err, ErrProto) {
		t.Fatalf("err %v", err)
	}
}

func TestParseDiameterTargets(t *testing.T) {
	got, err := ParseDiameterTargets("diameter://10.0.0.1:3868, 10.0.0.2:3869,")
	if err != nil || len(got) != 2 || got[0] != "10.0.0.1:3868" || got[1] != "10.0.0.2:3869" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "http://x:1", "diameter://x", "diameter://:3868"} {
		if _, err := ParseDiameterTargets(bad); err == nil {
			t.Errorf("ParseDiameterTargets(%q) accepted", bad)
		}
	}
	if !IsDiameterTarget(" diameter://a:1") || IsDiameterTarget("http://a:1") {
		t.Fatal("IsDiameterTarget")
	}
}

func TestGyDialFails(t *testing.T) {
	if _, err := New(Config{Proto: "gy", Targets: []string{"127.0.0.1:1"}, Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrConnection) {
		t.Fatalf("err %v", err)
	}
}
