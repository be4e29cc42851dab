package main

import (
	"strings"
	"testing"
)

func TestParseTargetsProto(t *testing.T) {
	for _, c := range []struct {
		proto, target, wantProto string
		want                     []string
		bad                      bool
	}{
		{"h2c", "http://a:1,b:2", "h2c", []string{"a:1", "b:2"}, false},
		{"h2c", "diameter://a:3868,diameter://b:3868", "gy", []string{"a:3868", "b:3868"}, false},
		{"gy", "a:3868", "gy", []string{"a:3868"}, false},
		{"gy", "diameter://a:3868", "gy", []string{"a:3868"}, false},
		{"http1", "diameter://a:3868", "", nil, true},
		{"gy", "http://a:1", "", nil, true},
	} {
		f := runFlags{proto: c.proto}
		got, err := f.parseTargets(c.target)
		if c.bad {
			if err == nil {
				t.Errorf("--proto %s --target %s accepted", c.proto, c.target)
			}
			continue
		}
		if err != nil || f.proto != c.wantProto || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("--proto %s --target %s: %v %v proto %s", c.proto, c.target, got, err, f.proto)
		}
	}
}
