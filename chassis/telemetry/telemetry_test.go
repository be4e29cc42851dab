package telemetry

import (
	"context"
	"testing"
)

func TestTraceparentRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", false},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false},
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"garbage", false},
	} {
		sc, ok := ParseTraceparent([]byte(tc.in))
		if ok != tc.ok {
			t.Errorf("ParseTraceparent(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok && tc.in[:2] == "00" {
			if got := string(AppendTraceparent(nil, sc)); got != tc.in {
				t.Errorf("round trip of %q = %q", tc.in, got)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		sc, _ := ParseTraceparent([]byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
		var buf [55]byte
		AppendTraceparent(buf[:0], sc)
	}); n != 0 {
		t.Errorf("traceparent parse+format allocates %v times", n)
	}
}

func TestSetupWithoutEndpoint(t *testing.T) {
	shutdown, err := Setup(context.Background(), Config{Service: "t", TraceRatio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if Active() != nil {
		t.Fatalf("tracing active without an OTLP endpoint")
	}
	shutdown(context.Background())
	if _, err := Setup(context.Background(), Config{TraceRatio: 2}); err == nil {
		t.Fatalf("ratio 2 accepted")
	}
}

func TestSetupWithEndpoint(t *testing.T) {
	shutdown, err := Setup(context.Background(), Config{Service: "t", TraceRatio: 0.1, OTLPEndpoint: "127.0.0.1:4318"})
	if err != nil {
		t.Fatal(err)
	}
	if a := Active(); a == nil || !a.Root {
		t.Fatalf("tracing not active with an endpoint and ratio 0.1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	shutdown(ctx) // nothing exported; the collector need not exist
	if Active() != nil {
		t.Fatalf("tracing still active after shutdown")
	}
}
