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
	f("load: {tps: .nan}", "load.tps")
	f("load: {sessions_per_second: -1}", "load.sessions_per_second")
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

func TestShard(t *testing.T) {
	sc := Default()
	sc.Subscribers.Count = 10
	sc.Load.TPS = 900
	total := 0
	next := "imsi-001010000000001"
	for i := 0; i < 3; i++ {
		s := Shard(sc, i, 3)
		if s.Subscribers.First != next {
			t.Fatalf("shard %d starts at %s, want %s", i, s.Subscribers.First, next)
		}
		first, _ := ParseSUPI(s.Subscribers.First)
		next = first.String(s.Subscribers.Count)
		total += s.Subscribers.Count
		if s.Load.TPS != 300 {
			t.Fatalf("shard %d rate %v", i, s.Load.TPS)
		}
		if s.Hash() == sc.Hash() {
			t.Fatalf("shard %d has the unsharded scenario's hash", i)
		}
	}
	if total != 10 {
		t.Fatalf("shards cover %d subscribers", total)
	}
	for _, bad := range []string{"3/3", "-1/2", "a/b", "1", "0/0", ""} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
}

func TestHashIgnoresThresholds(t *testing.T) {
	a, b := Default(), Default()
	b.Thresholds = []string{"p99<1ms"}
	if a.Hash() != b.Hash() {
		t.Fatal("thresholds change the scenario hash")
	}
	b.Load.TPS++
	if a.Hash() == b.Hash() {
		t.Fatal("a different rate has the same hash")
	}
}

func TestSubscriberRangeFits(t *testing.T) {
	f := func(first string, n int, want bool) {
		t.Helper()
		p, err := ParseSUPI(first)
		if err != nil {
			t.Fatal(err)
		}
		if got := rangeFits(p, n); got != want {
			t.Fatalf("%s + %d: fits %v, want %v", first, n, got, want)
		}
	}
	f("imsi-001010000000001", 100_000_000, true)
	f("imsi-999", 1, true)
	f("imsi-999", 2, false)
	f("imsi-9999999999999999999", 1, true)
	f("imsi-9999999999999999999", 2, false)
	if _, err := Parse([]byte("subscribers: {first: imsi-998, count: 5}")); err == nil || !strings.Contains(err.Error(), "subscribers.count") {
		t.Fatalf("overflowing range: %v", err)
	}
}

func TestThresholds(t *testing.T) {
	f := func(expr, metric, op string, value float64, offered bool) {
		t.Helper()
		th, err := ParseThreshold(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if th.Metric != metric || th.Op != op || th.OfferedFactor != offered || th.Value < value*(1-1e-12) || th.Value > value*(1+1e-12) {
			t.Fatalf("%q: %+v, want %s %s %v offered=%v", expr, th, metric, op, value, offered)
		}
	}
	f("p99<10ms", "p99", "<", 10, false)
	f(" p99.9 <= 500us ", "p99.9", "<=", 0.5, false)
	f("p999<2", "p99.9", "<", 2, false)
	f("errors<0.1%", "errors", "<", 0.001, false)
	f("errors<=0.02", "errors", "<=", 0.02, false)
	f("tps>=0.99*offered", "tps", ">=", 0.99, true)
	f("tps>5000", "tps", ">", 5000, false)
	f("late<1%", "late", "<", 0.01, false)
	f("jitter<0.5", "jitter", "<", 0.5, false)
	for _, bad := range []string{"", "p99", "p99<", "p99<soon", "p98<1ms", "errors<-1%", "tps>=x*offered", "<5", "p99=5ms", "p99<-1ms", "errors<NaN"} {
		if _, err := ParseThreshold(bad); err == nil || !errors.Is(err, ErrThreshold) {
			t.Errorf("ParseThreshold(%q): err = %v, want ErrThreshold", bad, err)
		}
	}
	th, _ := ParseThreshold("tps>=0.99*offered")
	if !th.Holds(990, 1000) || th.Holds(989, 1000) {
		t.Fatal("tps>=0.99*offered misjudged")
	}
	if _, err := Parse([]byte("thresholds: [\"p99<10ms\", \"p99<<1\"]")); err == nil || !strings.Contains(err.Error(), "thresholds[1]") {
		t.Fatalf("bad threshold in a file: %v", err)
	}

	sc := Default()
	names := func(ts []Threshold) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.Expr)
		}
		return strings.Join(s, " ")
	}
	if got := names(sc.EffectiveThresholds(false)); got != "tps>0 errors<=1%" {
		t.Fatalf("defaults: %q", got)
	}
	sc.Thresholds = []string{"errors<5%", "p99<10ms"}
	if got := names(sc.EffectiveThresholds(false)); got != "tps>0 errors<5% p99<10ms" {
		t.Fatalf("errors threshold replacing the default: %q", got)
	}
	if got := names(sc.EffectiveThresholds(true)); got != "errors<5% p99<10ms" {
		t.Fatalf("without defaults: %q", got)
	}
}
