package diameter

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/loadgen/gy/gytest"
)

const (
	imsi1 = "001010000000001"
	supi1 = "imsi-" + imsi1
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startServer(t testing.TB, cfg Config, ch chf.Charger) *Server {
	t.Helper()
	s := newTestServer(t, cfg, ch)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return s
}

// startServerOn is startServer serving ln.
func startServerOn(t testing.TB, cfg Config, ch chf.Charger, ln net.Listener) *Server {
	t.Helper()
	var served chan error
	t.Cleanup(func() { // after the Close newTestServer registers
		if served == nil {
			return
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
	})
	s := newTestServer(t, cfg, ch)
	served = make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	return s
}

// newTestServer is a server (quiet unless cfg has a Logger) closed when
// the test ends.
func newTestServer(t testing.TB, cfg Config, ch chf.Charger) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := NewServer(cfg, ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, addr, host string) *gy.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := gy.DialConfig(ctx, gy.Config{Addr: addr, OriginHost: host, OriginRealm: "loadgen.test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func do(t testing.TB, c *gy.Conn, req *gy.Request) *gy.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var a gy.Answer
	if err := c.Do(ctx, req, &a); err != nil {
		t.Fatalf("Do(%+v): %v", req, err)
	}
	return &a
}

func expectResult(t testing.TB, a *gy.Answer, want uint32) {
	t.Helper()
	if a.ResultCode != want {
		t.Fatalf("Result-Code = %d, want %d (answer %+v)", a.ResultCode, want, a)
	}
}

func TestDataSessionBalanceMath(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 100_00)
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	sid := c.NewSessionID()
	var charged int64

	a := do(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, Number: 0, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Request: true}}})
	expectResult(t, a, 2001)
	if len(a.Grants) != 1 {
		t.Fatalf("grants = %+v", a.Grants)
	}
	g := a.Grants[0]
	if g.RatingGroup != 10 || g.ResultCode != 2001 || g.Granted.TotalVolume != 10_000_000 || g.ValidityTime != 1800 || g.QuotaHoldingTime != 300 || g.FinalUnit {
		t.Fatalf("grant = %+v", g)
	}
	if !a.HasCost || a.CurrencyCode != 978 || a.CostExponent != -2 || a.Charged != 0 {
		t.Fatalf("cost = %v %d %d %d", a.HasCost, a.CurrencyCode, a.CostExponent, a.Charged)
	}
	if acc := f.account(supi1); acc.balance != 100_00 || acc.reserved != 10 {
		t.Fatalf("after I: %+v", acc)
	}

	// 3.5 MB used (ceil → 4), 5 MB more wanted.
	a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Update, Number: 1, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 5_000_000},
			Used: chf.Units{UplinkVolume: 1_000_000, DownlinkVolume: 2_500_000}}}})
	expectResult(t, a, 2001)
	charged += a.Charged
	if a.Charged != 4 || a.Grants[0].Granted.TotalVolume != 5_000_000 || a.RequestNumber != 1 || a.RequestType != gy.Update {
		t.Fatalf("U answer = %+v", a)
	}
	if acc := f.account(supi1); acc.balance != 100_00-4 || acc.reserved != 5 {
		t.Fatalf("after U: %+v", acc)
	}

	a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 2, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 2_000_000}}}})
	expectResult(t, a, 2001)
	charged += a.Charged
	if acc := f.account(supi1); acc.balance != 100_00-6 || acc.reserved != 0 || charged != 6 {
		t.Fatalf("after T: %+v charged %d", acc, charged)
	}
	// The session is gone: an update now is 5002.
	a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Update, Number: 3, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 1}}}})
	expectResult(t, a, 5002)
}

func TestVoiceSessionAndFinalUnit(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 100) // 100 seconds of voice
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	sid := c.NewSessionID()
	a := do(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsi1, ServiceContextID: "32260@3gpp.org",
		Services: []gy.Service{{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 60}}}})
	expectResult(t, a, 2001)
	if g := a.Grants[0]; g.Granted.Time != 60 || !g.FinalUnit || g.FinalUnitAction != 0 {
		t.Fatalf("grant = %+v, want 60 s with FUI TERMINATE (40 s left)", g)
	}
	a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Update, Number: 1, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 60}, Used: chf.Units{Time: 60}}}})
	// 40 s left after 60 s used: 60 more cannot be reserved.
	expectResult(t, a, 4012)
	if g := a.Grants[0]; g.ResultCode != 4012 || !g.Granted.IsZero() {
		t.Fatalf("grant = %+v", g)
	}
	a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 2, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 20, Used: chf.Units{Time: 15}}}})
	expectResult(t, a, 2001)
	if acc := f.account(supi1); acc.balance != 25 || acc.reserved != 0 {
		t.Fatalf("account = %+v, want 25 left", acc)
	}
}

func TestSMSEventAndBalanceCheck(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 12)
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "smsc.loadgen.test")
	check := func(want uint32) {
		t.Helper()
		a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1,
			Action: gy.CheckBalance, HasAction: true})
		expectResult(t, a, 2001)
		if !a.HasCheckBalance || a.CheckBalanceResult != want || a.HasCost {
			t.Fatalf("check balance = %+v, want %d", a, want)
		}
	}
	check(gy.EnoughCredit)
	sms := func(want uint32) *gy.Answer {
		t.Helper()
		a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1,
			Action: gy.DirectDebiting, HasAction: true, ServiceContextID: "32274@3gpp.org",
			Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}})
		expectResult(t, a, want)
		return a
	}
	if a := sms(2001); a.Charged != 5 || a.Grants[0].Granted.ServiceSpecific != 1 {
		t.Fatalf("sms answer = %+v", a)
	}
	sms(2001)
	if acc := f.account(supi1); acc.balance != 2 {
		t.Fatalf("balance = %d, want 2", acc.balance)
	}
	sms(4012)
	check(gy.EnoughCredit)
	f.add(supi1, 0)
	check(gy.NoCredit)
}

func TestRetransmissionChargesOnce(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1000)
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	sid := c.NewSessionID()
	do(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsi1, Services: []gy.Service{{RatingGroup: 10, Request: true}}})
	u := &gy.Request{SessionID: sid, Type: gy.Update, Number: 1, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 7_000_000}}}}
	first := do(t, c, u)
	expectResult(t, first, 2001)
	u.Retransmit, u.EndToEnd = true, first.EndToEnd
	again := do(t, c, u)
	expectResult(t, again, 2001)
	u.Retransmit, u.EndToEnd = false, 0 // same number without the T flag
	third := do(t, c, u)
	expectResult(t, third, 2001)
	if first.Charged != 7 || again.Charged != 0 || third.Charged != 0 {
		t.Fatalf("charged %d, %d, %d; want 7, 0, 0", first.Charged, again.Charged, third.Charged)
	}
	if again.EndToEnd != first.EndToEnd || again.Grants[0] != first.Grants[0] {
		t.Fatalf("retransmission answered differently: %+v vs %+v", again, first)
	}
	if acc := f.account(supi1); acc.balance != 1000-7 {
		t.Fatalf("balance = %d, want %d", acc.balance, 1000-7)
	}
	// An older number is refused.
	u.Number = 0
	a := do(t, c, u)
	expectResult(t, a, 5004)
	if a.FailedAVP != wire.CodeCCRequestNumber {
		t.Fatalf("Failed-AVP = %d", a.FailedAVP)
	}
}

func TestResultCodes(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1)
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	data := []gy.Service{{RatingGroup: 10, Request: true}}
	for _, tc := range []struct {
		name   string
		req    gy.Request
		want   uint32
		failed uint32
	}{
		{"credit limit", gy.Request{Type: gy.Initial, IMSI: imsi1, Services: []gy.Service{{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 50_000_000}}}}, 4012, 0},
		{"user unknown", gy.Request{Type: gy.Initial, IMSI: "001019999999999", Services: data}, 5030, 0},
		{"msisdn not provisioned", gy.Request{Type: gy.Initial, MSISDN: "491701234567", Services: data}, 5030, 0},
		{"rating failed", gy.Request{Type: gy.Initial, IMSI: imsi1, Services: []gy.Service{{RatingGroup: 99, Request: true}}}, 2001, 0},
		{"unknown session", gy.Request{Type: gy.Update, Number: 1, IMSI: imsi1, Services: data}, 5002, 0},
		{"bad request type", gy.Request{Type: 9, IMSI: imsi1}, 5004, wire.CodeCCRequestType},
		{"bad imsi", gy.Request{Type: gy.Initial, IMSI: "00101abc"}, 5004, wire.CodeSubscriptionID},
		{"bad requested action", gy.Request{Type: gy.Event, IMSI: imsi1, Action: 7, HasAction: true}, 5004, wire.CodeRequestedAction},
		{"missing subscription", gy.Request{Type: gy.Initial, Services: data}, 5005, wire.CodeSubscriptionID},
		{"missing requested action", gy.Request{Type: gy.Event, IMSI: imsi1, Services: data}, 5005, wire.CodeRequestedAction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.SessionID = c.NewSessionID()
			a := do(t, c, &tc.req)
			expectResult(t, a, tc.want)
			if a.FailedAVP != tc.failed {
				t.Fatalf("Failed-AVP = %d, want %d", a.FailedAVP, tc.failed)
			}
			if tc.name == "rating failed" && (len(a.Grants) != 1 || a.Grants[0].ResultCode != 5031) {
				t.Fatalf("MSCC = %+v, want Result-Code 5031", a.Grants)
			}
		})
	}
}

func TestTooBusy(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1000)
	f.block = make(chan struct{})
	s := startServer(t, Config{MaxInFlight: 1}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	done := make(chan *gy.Answer, 1)
	var held gy.Answer
	err := c.Go(&gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Request: true}}}, &held, func(a *gy.Answer, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- a
	})
	if err != nil {
		t.Fatal(err)
	}
	for f.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsi1,
		Services: []gy.Service{{RatingGroup: 10, Request: true}}})
	expectResult(t, a, 3004)
	if !a.ErrorBit {
		t.Fatal("3004 without the E bit")
	}
	close(f.block)
	expectResult(t, <-done, 2001)
	if st := s.Stats(); st.TooBusy != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestCoreErrorIsTooBusy(t *testing.T) {
	f := newFakeCharger()
	f.err = errors.New("ocp unreachable")
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsi1})
	expectResult(t, a, 3004)
}

func TestUnknownPeerRejected(t *testing.T) {
	f := newFakeCharger()
	s := startServer(t, Config{AllowRealms: []string{"loadgen.test"}, AllowHosts: []string{"pgw*.loadgen.test"}}, f)
	dial(t, s.Addr(), "pgw7.loadgen.test") // allowed
	for _, tc := range []struct{ host, realm string }{
		{"pgw1.evil.test", "evil.test"},
		{"mme.loadgen.test", "loadgen.test"},
	} {
		_, err := gy.DialConfig(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: tc.host, OriginRealm: tc.realm})
		if !errors.Is(err, gy.ErrRejected) || !strings.Contains(err.Error(), "3010") {
			t.Fatalf("%s/%s: err = %v, want 3010 rejection", tc.host, tc.realm, err)
		}
	}
	// The server closes the connection after the 3010 CEA.
	conn := rawConnect(t, s.Addr(), "x.evil.test", "evil.test", 3010)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after 3010 = %v, want EOF", err)
	}
	if st := s.Stats(); st.Rejected != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

// rawConnect sends a CER and checks the CEA Result-Code.
func rawConnect(t *testing.T, addr, host, realm string, want uint32) net.Conn {
	t.Helper()
	return rawConnectWith(t, &net.Dialer{Timeout: 5 * time.Second}, addr, host, realm, want)
}

// rawConnectWith is rawConnect dialling with d.
func rawConnectWith(t *testing.T, d *net.Dialer, addr, host, realm string, want uint32) net.Conn {
	t.Helper()
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdCapabilitiesExchange, 0, 1, 1)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, host)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, realm)
	m = wire.AppendBytes(m, 257, wire.AVPMandatory, 0, []byte{0, 1, 127, 0, 0, 1})
	m = wire.AppendUint32(m, 266, wire.AVPMandatory, 0, 0)
	m = wire.AppendString(m, 269, 0, 0, "raw")
	m = wire.AppendUint32(m, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, 4)
	wire.SetLength(m)
	if _, err := conn.Write(m); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got := readResult(t, bufio.NewReader(conn)); got != want {
		t.Fatalf("CEA Result-Code = %d, want %d", got, want)
	}
	conn.SetReadDeadline(time.Time{})
	return conn
}

func readResult(t *testing.T, br *bufio.Reader) uint32 {
	t.Helper()
	msg, err := wire.ReadMessage(br, nil, 1<<20)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	it := wire.MessageIter(msg)
	var a wire.AVP
	for it.Next(&a) {
		if a.Code == wire.CodeResultCode {
			v, _ := wire.Uint32(a.Data)
			return v
		}
	}
	t.Fatalf("answer without Result-Code: %x", msg)
	return 0
}

func rawConnectNoCER(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFakeCharger()
	f.add(supi1, 100)
	s, err := NewServer(Config{Logger: quiet}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p, err := gytest.DialPool(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: "pgw%d.loadgen.test", OriginRealm: "loadgen.test"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c := p.Conn(i)
		do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1, Action: gy.CheckBalance, HasAction: true})
	}
	p.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
