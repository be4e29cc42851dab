package gy

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
	"github.com/chf-testbed/testbed/loadgen/driver"
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

// do sends c through w and waits for its outcome.
func do(t *testing.T, w driver.Worker, c driver.Charge) (*driver.Outcome, error) {
	t.Helper()
	var o driver.Outcome
	var err error
	done := false
	if err := w.Queue(&c, &o, func(e error) { err, done = e, true }); err != nil {
		return &o, err
	}
	w.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for !done {
		if time.Now().After(deadline) {
			t.Fatalf("%+v: no outcome", c)
		}
		w.Poll(10 * time.Millisecond)
	}
	return &o, err
}

func TestGyDriver(t *testing.T) {
	srv := startDiameter(t, "127.0.0.1:0")
	defer func() { srv.Close() }()
	d, err := New(driver.Config{Proto: "gy", Targets: []string{srv.Addr()}, Conns: 2, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Targets() != 2 {
		t.Fatalf("driver with %d targets", d.Targets())
	}
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ok := func(c driver.Charge) *driver.Outcome {
		t.Helper()
		o, err := do(t, w, c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		return o
	}
	supi := []byte("imsi-001010000000001")
	create := ok(driver.Charge{Op: driver.ChargeCreate, Target: 1, Flow: 7, SUPI: supi, RatingGroup: 10, Request: true})
	if create.Class != "" || !create.Resolved || !create.HasCharged || create.Charged != 7 || !strings.HasPrefix(string(create.Ref), "lg") || !strings.HasSuffix(string(create.Ref), ";7") {
		t.Fatalf("create: %+v (ref %q)", create, create.Ref)
	}
	sess := append([]byte(nil), create.Ref...)
	for _, c := range []struct {
		charge driver.Charge
		class  string
		ref    bool
		gone   bool
	}{
		{driver.Charge{Op: driver.ChargeUpdate, SUPI: supi, Session: sess, Seq: 1, RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 5}}, "", false, false},
		{driver.Charge{Op: driver.ChargeRelease, SUPI: supi, Session: sess, Seq: 2, RatingGroup: 10, Used: chf.Units{TotalVolume: 5}}, "", false, false},
		{driver.Charge{Op: driver.ChargeEvent, SUPI: supi, RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}, "", false, false},
		{driver.Charge{Op: driver.ChargeBalance, SUPI: supi}, "", false, false},
		{driver.Charge{Op: driver.ChargeCreate, SUPI: []byte("imsi-001010000000999"), RatingGroup: 10, Request: true}, "gy_5030", false, true},
		{driver.Charge{Op: driver.ChargeCreate, SUPI: []byte("imsi-001010000000998"), RatingGroup: 10, Request: true}, "rg_4012", true, false},
	} {
		r := ok(c.charge)
		if r.Class != c.class || (len(r.Ref) > 0) != c.ref || r.Gone != c.gone || !r.Resolved {
			t.Errorf("op %d: outcome %+v, want class %q ref %v gone %v", c.charge.Op, r, c.class, c.ref, c.gone)
		}
	}

	// The server goes away: requests fail as connection errors, and the
	// driver dials again once it is back.
	c := driver.Charge{Op: driver.ChargeEvent, SUPI: supi, RatingGroup: 30, Request: true}
	addr := srv.Addr()
	srv.Close()
	o, err := do(t, w, c)
	if !errors.Is(err, driver.ErrConnection) || o.Class != driver.ClassConnection {
		t.Fatalf("after the server closed: %v, class %q", err, o.Class)
	}
	srv = startDiameter(t, addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err = do(t, w, c); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not redialed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParseDiameterTargets(t *testing.T) {
	got, err := driver.ParseDiameterTargets("diameter://10.0.0.1:3868, 10.0.0.2:3869,")
	if err != nil || len(got) != 2 || got[0] != "10.0.0.1:3868" || got[1] != "10.0.0.2:3869" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "http://x:1", "diameter://x", "diameter://:3868"} {
		if _, err := driver.ParseDiameterTargets(bad); err == nil {
			t.Errorf("ParseDiameterTargets(%q) accepted", bad)
		}
	}
	if !driver.IsDiameterTarget(" diameter://a:1") || driver.IsDiameterTarget("http://a:1") {
		t.Fatal("IsDiameterTarget")
	}
}

func TestGyDialFails(t *testing.T) {
	if _, err := New(driver.Config{Proto: "gy", Targets: []string{"127.0.0.1:1"}, Timeout: 100 * time.Millisecond}); !errors.Is(err, driver.ErrConnection) {
		t.Fatalf("err %v", err)
	}
}
