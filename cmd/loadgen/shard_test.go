package main

import (
	"testing"

	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func TestShardScenario(t *testing.T) {
	sc := scenario.Default()
	sc.Subscribers.Count = 10
	sc.Load.TPS = 900
	total := 0
	next := "imsi-001010000000001"
	for i := 0; i < 3; i++ {
		s := ShardScenario(sc, i, 3)
		if s.Subscribers.First != next {
			t.Fatalf("shard %d starts at %s, want %s", i, s.Subscribers.First, next)
		}
		first, _ := scenario.ParseSUPI(s.Subscribers.First)
		next = first.String(s.Subscribers.Count)
		total += s.Subscribers.Count
		if s.Load.TPS != 300 {
			t.Fatalf("shard %d rate %v", i, s.Load.TPS)
		}
	}
	if total != 10 {
		t.Fatalf("shards cover %d subscribers", total)
	}
	for _, bad := range []string{"3/3", "-1/2", "a/b", "1"} {
		if _, _, err := parseShard(bad); err == nil {
			t.Errorf("parseShard(%q) accepted", bad)
		}
	}
}
