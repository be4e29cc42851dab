package diameter

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// ccrBody returns a valid CCR-I for imsi1 built by go-diameter, so the
// hand-rolled decoder is checked against an independent encoder.
func goDiameterCCR(t testing.TB, hbh uint32) *diam.Message {
	t.Helper()
	m := diam.NewMessage(diam.CreditControl, diam.RequestFlag|diam.ProxiableFlag, 4, hbh, hbh, dict.Default)
	m.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String("pgw.example;1;2;gd"))
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("pgw.example"))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("example"))
	m.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity("chf.test"))
	m.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(4))
	m.NewAVP(avp.ServiceContextID, avp.Mbit, 0, datatype.UTF8String("32251@3gpp.org"))
	m.NewAVP(avp.CCRequestType, avp.Mbit, 0, datatype.Enumerated(2))
	m.NewAVP(avp.CCRequestNumber, avp.Mbit, 0, datatype.Unsigned32(7))
	m.NewAVP(avp.SubscriptionID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.SubscriptionIDType, avp.Mbit, 0, datatype.Enumerated(0)),
		diam.NewAVP(avp.SubscriptionIDData, avp.Mbit, 0, datatype.UTF8String("491701234567")),
	}})
	m.NewAVP(avp.SubscriptionID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.SubscriptionIDType, avp.Mbit, 0, datatype.Enumerated(1)),
		diam.NewAVP(avp.SubscriptionIDData, avp.Mbit, 0, datatype.UTF8String(imsi1)),
	}})
	m.NewAVP(avp.MultipleServicesIndicator, avp.Mbit, 0, datatype.Enumerated(1))
	m.NewAVP(avp.MultipleServicesCreditControl, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.RequestedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCTotalOctets, avp.Mbit, 0, datatype.Unsigned64(5_000_000)),
		}}),
		diam.NewAVP(avp.UsedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCInputOctets, avp.Mbit, 0, datatype.Unsigned64(1000)),
			diam.NewAVP(avp.CCOutputOctets, avp.Mbit, 0, datatype.Unsigned64(2000)),
			diam.NewAVP(avp.CCTime, avp.Mbit, 0, datatype.Unsigned32(30)),
		}}),
		diam.NewAVP(avp.UsedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCTotalOctets, avp.Mbit, 0, datatype.Unsigned64(3000)),
			diam.NewAVP(avp.CCServiceSpecificUnits, avp.Mbit, 0, datatype.Unsigned64(2)),
		}}),
		diam.NewAVP(avp.RatingGroup, avp.Mbit, 0, datatype.Unsigned32(10)),
		diam.NewAVP(avp.QuotaHoldingTime, avp.Mbit|avp.Vbit, 10415, datatype.Unsigned32(9)), // ignored
	}})
	m.NewAVP(avp.MultipleServicesCreditControl, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.RatingGroup, avp.Mbit, 0, datatype.Unsigned32(20)),
		diam.NewAVP(avp.UsedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCTime, avp.Mbit, 0, datatype.Unsigned32(61)),
		}}),
	}})
	return m
}

func TestDecodeGoDiameterCCR(t *testing.T) {
	b, err := goDiameterCCR(t, 5).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	var c ccr
	decodeCCR(b, &c)
	if c.result != 0 {
		t.Fatalf("result %d failed %x", c.result, c.failed)
	}
	var req chf.ChargeRequest
	c.fill(&req)
	want := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi1, Session: "pgw.example;1;2;gd", Seq: 7, Lines: []chf.UsageLine{
		{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 5_000_000},
			// Each USU counts as reported: 1000+2000, then a total of 3000.
			Used: chf.Units{Time: 30, TotalVolume: 6000, UplinkVolume: 1000, DownlinkVolume: 2000, ServiceSpecific: 2}},
		{RatingGroup: 20, Used: chf.Units{Time: 61}},
	}}
	if req.Op != want.Op || req.SUPI != want.SUPI || req.Session != want.Session || req.Seq != want.Seq ||
		len(req.Lines) != 2 || req.Lines[0] != want.Lines[0] || req.Lines[1] != want.Lines[1] {
		t.Fatalf("got  %+v\nwant %+v", req, want)
	}
}

// TestCCADecodesWithGoDiameter checks the hand-built CCA against
// go-diameter's dictionary-driven decoder.
func TestCCADecodesWithGoDiameter(t *testing.T) {
	b, _ := goDiameterCCR(t, 9).Serialize()
	var c ccr
	decodeCCR(b, &c)
	resp := &chf.ChargeResponse{Charged: 1234, Currency: "EUR", Lines: []chf.GrantLine{
		{RatingGroup: 10, Granted: chf.Units{TotalVolume: 5_000_000, Time: 60}, ValidityTime: 1800, QuotaHoldingTime: 300, FinalUnit: true},
		{RatingGroup: 20, Result: chf.ResultRatingFailed},
	}}
	srv, _ := NewServer(Config{}, newFakeCharger())
	out := appendCCA(nil, &c, srv.ident, &answer{result: 2001, resp: resp, op: chf.OpUpdate, defaultCur: "EUR"})
	m, err := diam.ReadMessage(bytesReader(out), dict.Default)
	if err != nil {
		t.Fatal(err)
	}
	if m.DecodeErr != nil {
		t.Fatal(m.DecodeErr)
	}
	find := func(path ...any) []*diam.AVP {
		t.Helper()
		vs, err := m.FindAVPsWithPath(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	u32 := func(a *diam.AVP) uint32 {
		switch v := a.Data.(type) {
		case datatype.Unsigned32:
			return uint32(v)
		case datatype.Enumerated:
			return uint32(v)
		case datatype.Integer32:
			return uint32(v)
		}
		t.Fatalf("unexpected type %T", a.Data)
		return 0
	}
	if got := find(avp.ResultCode); len(got) != 1 || u32(got[0]) != 2001 {
		t.Fatalf("Result-Code %v", got)
	}
	if got := find(avp.SessionID); string(got[0].Data.(datatype.UTF8String)) != "pgw.example;1;2;gd" {
		t.Fatalf("Session-Id %v", got)
	}
	rgs := find(avp.MultipleServicesCreditControl, avp.RatingGroup)
	if len(rgs) != 2 || u32(rgs[0]) != 10 || u32(rgs[1]) != 20 {
		t.Fatalf("Rating-Group %v", rgs)
	}
	if got := find(avp.MultipleServicesCreditControl, avp.GrantedServiceUnit, avp.CCTotalOctets); len(got) != 1 || uint64(got[0].Data.(datatype.Unsigned64)) != 5_000_000 {
		t.Fatalf("CC-Total-Octets %v", got)
	}
	if got := find(avp.MultipleServicesCreditControl, avp.ResultCode); len(got) != 2 || u32(got[1]) != 5031 {
		t.Fatalf("MSCC Result-Code %v", got)
	}
	if got := find(avp.MultipleServicesCreditControl, avp.FinalUnitIndication, avp.FinalUnitAction); len(got) != 1 || u32(got[0]) != 0 {
		t.Fatalf("Final-Unit-Action %v", got)
	}
	var qht []uint32
	for _, ms := range find(avp.MultipleServicesCreditControl) {
		for _, a := range ms.Data.(*diam.GroupedAVP).AVP {
			if a.Code == avp.QuotaHoldingTime && a.VendorID == 10415 {
				qht = append(qht, u32(a))
			}
		}
	}
	if len(qht) != 1 || qht[0] != 300 {
		t.Fatalf("Quota-Holding-Time %v", qht)
	}
	if got := find(avp.CostInformation, avp.UnitValue, avp.ValueDigits); len(got) != 1 || int64(got[0].Data.(datatype.Integer64)) != 1234 {
		t.Fatalf("Value-Digits %v", got)
	}
	if got := find(avp.CostInformation, avp.UnitValue, avp.Exponent); int32(got[0].Data.(datatype.Integer32)) != -2 {
		t.Fatalf("Exponent %v", got)
	}
	if got := find(avp.CostInformation, avp.CurrencyCode); u32(got[0]) != 978 {
		t.Fatalf("Currency-Code %v", got)
	}
}

// TestMalformedDoesNotHurtOthers sends broken messages on one peer while
// another charges normally.
func TestMalformedDoesNotHurtOthers(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1_000_000)
	s := startServer(t, Config{MaxMessageSize: 8 << 10}, f)
	good := dial(t, s.Addr(), "pgw1.loadgen.test")
	check := func() {
		t.Helper()
		a := do(t, good, &gy.Request{SessionID: good.NewSessionID(), Type: gy.Event, IMSI: imsi1, Action: gy.DirectDebiting, HasAction: true,
			Services: []gy.Service{{RatingGroup: 30, Request: true}}})
		expectResult(t, a, 2001)
	}
	check()

	valid, _ := goDiameterCCR(t, 1).Serialize()
	overrun := append([]byte(nil), valid...)
	overrun[wire.HeaderLen+5] = 0x7f // first AVP claims 8 MB
	badU32 := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdCreditControl, 4, 3, 3)
	badU32 = wire.AppendString(badU32, wire.CodeSessionID, wire.AVPMandatory, 0, "s;1")
	badU32 = wire.AppendBytes(badU32, wire.CodeCCRequestNumber, wire.AVPMandatory, 0, []byte{1, 2})
	wire.SetLength(badU32)
	noRG := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdCreditControl, 4, 4, 4)
	noRG = wire.AppendString(noRG, wire.CodeSessionID, wire.AVPMandatory, 0, "s;2")
	noRG, g := wire.BeginGroup(noRG, wire.CodeMSCC, wire.AVPMandatory, 0)
	noRG = wire.EndGroup(noRG, g)
	wire.SetLength(noRG)
	wrongApp := append([]byte(nil), valid...)
	wrongApp[11] = 0
	unknownCmd := wire.AppendHeader(nil, wire.FlagRequest, 999, 4, 6, 6)
	wire.SetLength(unknownCmd)

	conn := rawConnect(t, s.Addr(), "raw.loadgen.test", "loadgen.test", 2001)
	br := bufio.NewReader(conn)
	for _, tc := range []struct {
		name string
		msg  []byte
		want uint32
	}{
		{"AVP length overrun", overrun, 5014},
		{"Unsigned32 of 2 bytes", badU32, 5014},
		{"MSCC without Rating-Group", noRG, 5005},
		{"wrong application", wrongApp, 3007},
		{"unknown command", unknownCmd, 3001},
		{"valid (reaches the core: no such session)", valid, 5002},
	} {
		if _, err := conn.Write(tc.msg); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got := readResult(t, br); got != tc.want {
			t.Fatalf("%s: Result-Code %d, want %d", tc.name, got, tc.want)
		}
		check()
	}
	// Unrecoverable framing: the connection is closed, others carry on.
	for _, frame := range [][]byte{
		{2, 0, 0, 20, 0x80, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1},                     // version 2
		{1, 0, 0, 21, 0x80, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1},                     // length not a multiple of 4
		{1, 0x10, 0, 0, 0x80, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1},                   // 1 MB > MaxMessageSize
		{1, 0, 0, 8, 0x80, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1},                      // shorter than a header
		append([]byte{1, 0, 0, 40, 0x80, 0, 1, 16, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1}, 1, 2), // truncated, then EOF
	} {
		c := rawConnect(t, s.Addr(), "raw.loadgen.test", "loadgen.test", 2001)
		c.Write(frame)
		if tc, ok := c.(interface{ CloseWrite() error }); ok && frame[3] == 40 {
			tc.CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("frame %x: %v, want EOF", frame[:4], err)
		}
		check()
	}
	// A first message that is not a CER is refused.
	c := rawConnectNoCER(t, s.Addr())
	c.Write(valid)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("CCR before CER: read %x, %v", b, err)
	}
	check()
}

func TestWatchdogAndDisconnect(t *testing.T) {
	f := newFakeCharger()
	// Intervals long enough that a DWA is never 2·Tw late on a loaded CI
	// machine running every package's tests with -race (at Tw = 100 ms it
	// was, once).
	s := startServer(t, Config{WatchdogInterval: 300 * time.Millisecond}, f)
	// The client answers the server's DWRs (and sends its own): it stays up
	// for many intervals of silence.
	c, err := gy.DialConfig(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: "pgw1.loadgen.test", OriginRealm: "loadgen.test",
		WatchdogInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1800 * time.Millisecond)
	if st := s.Stats(); st.Peers != 1 {
		t.Fatalf("peer dropped despite watchdog: %+v", st)
	}
	// A raw peer that answers nothing is disconnected after 2·Tw.
	raw := rawConnect(t, s.Addr(), "mute.loadgen.test", "loadgen.test", 2001)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(raw)
	if err != nil {
		t.Fatalf("mute peer: %v", err)
	}
	if h, err := wire.ParseHeader(b); err != nil || h.Code != wire.CmdDeviceWatchdog || !h.IsRequest() {
		t.Fatalf("mute peer got %x, want a DWR then EOF", b)
	}
	// DWR from a peer gets a DWA.
	raw = rawConnect(t, s.Addr(), "dw.loadgen.test", "loadgen.test", 2001)
	dwr := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdDeviceWatchdog, 0, 77, 77)
	dwr = wire.AppendString(dwr, wire.CodeOriginHost, wire.AVPMandatory, 0, "dw.loadgen.test")
	dwr = wire.AppendString(dwr, wire.CodeOriginRealm, wire.AVPMandatory, 0, "loadgen.test")
	wire.SetLength(dwr)
	raw.Write(dwr)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got := readResult(t, bufio.NewReader(raw)); got != 2001 {
		t.Fatalf("DWA %d", got)
	}
	raw.Close()
	// Client Close sends DPR: the server drops the peer.
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Peers != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("peer still connected after DPR: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestShutdownSendsDPR(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 100)
	s, err := NewServer(Config{Logger: quiet}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1, Action: gy.CheckBalance, HasAction: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var a gy.Answer
	if err := c.Do(ctx, &gy.Request{SessionID: "x", Type: gy.Initial, IMSI: imsi1}, &a); err == nil {
		t.Fatal("request after shutdown succeeded")
	}
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestIsTermination: the CCR-T that the adaptive limit never sheds is
// told from its top-level CC-Request-Type alone.
func TestIsTermination(t *testing.T) {
	msg := func(reqType uint32) []byte {
		b := make([]byte, wire.HeaderLen)
		b = wire.AppendUint32(b, wire.CodeCCRequestNumber, wire.AVPMandatory, 0, 7)
		return wire.AppendUint32(b, wire.CodeCCRequestType, wire.AVPMandatory, 0, reqType)
	}
	if !isTermination(msg(wire.RequestTermination)) {
		t.Error("CCR-T not recognised")
	}
	for _, rt := range []uint32{wire.RequestInitial, wire.RequestEvent, 2} {
		if isTermination(msg(rt)) {
			t.Errorf("request type %d taken for a termination", rt)
		}
	}
	if isTermination(make([]byte, wire.HeaderLen)) || isTermination(nil) {
		t.Error("a CCR without the AVP taken for a termination")
	}
}
