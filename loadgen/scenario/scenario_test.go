package scenario

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultValid(t *testing.T) {
	s := Default()
	if err := s.Validate(); err != nil {
		t.Fatalf("default scenario invalid: %v", err)
	}
	if got := s.TxnsPerFlow(); got < 2 || got > 4 {
		t.Fatalf("TxnsPerFlow = %v", got)
	}
	if r := s.FlowRate() * s.TxnsPerFlow(); r < 999.999 || r > 1000.001 {
		t.Fatalf("flow rate x txns = %v, want the 1000 TPS offered", r)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	f := func(yaml, field string) {
		t.Helper()
		_, err := Parse([]byte(yaml))
		if err == nil {
			t.Fatalf("%q: no error", yaml)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: error %v does not wrap ErrInvalid", yaml, err)
		}
		if !strings.Contains(err.Error(), field) {
			t.Fatalf("%q: error %q does not name %q", yaml, err, field)
		}
	}
	f("mix: {data: -1}", "mix.data")
	f("mix: {data: 0, voice: 0, sms: 0, balance: 0}", "mix")
	f("data: {rating_group: 0}", "data.rating_group")
	f("voice: {updates: -2}", "voice.updates")
	f("data: {requested: {total_volume: 0}}", "data.requested")
	f("voice: {think_time: 2h}", "voice.think_time")
	f("data: {think_time: soon}", "soon")
	f("sms: {units: {service_specific_units: 0}}", "sms.units")
	f("subscribers: {first: imsi-abc}", "subscribers.first")
	f("subscribers: {count: 0}", "subscribers.count")
	f("load: {tps: 10, sessions_per_second: 5}", "load")
	f("load: {tps: 0}", "load.tps")
	f("load: {tps: -5}", "load.tps")
	f("phases: {duration: 0s}", "phases.duration")
	f("phases: {warm_up: -1s}", "phases.warm_up")
	f("timeout: 0s", "timeout")
	f("max_in_flight: 0", "max_in_flight")
	f("late_drop: 1ms\nlate_threshold: 5ms", "late_drop")
	f("bogus: 1", "bogus")
	f("mix: {dta: 1}", "dta")
}

func TestParseOverridesDefault(t *testing.T) {
	s, err := Parse([]byte("name: x\nload: {tps: 0, sessions_per_second: 100}\nvoice: {updates: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "x" || s.Voice.Updates != 5 || s.Voice.RatingGroup != 20 || s.FlowRate() != 100 {
		t.Fatalf("unexpected scenario %+v", s)
	}
	if _, err := Parse(nil); err != nil {
		t.Fatalf("empty YAML: %v", err)
	}
}

func TestSUPI(t *testing.T) {
	p, err := ParseSUPI("imsi-001010000000001")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(99999); got != "imsi-001010000100000" {
		t.Fatalf("got %s", got)
	}
	for _, bad := range []string{"imsi-", "", "imsi-12345678901234567890"} {
		if _, err := ParseSUPI(bad); err == nil {
			t.Errorf("ParseSUPI(%q) accepted", bad)
		}
	}
}
