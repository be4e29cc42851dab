package scenario

import (
	"testing"
	"time"
)

func TestParseBucketValidity(t *testing.T) {
	for _, c := range []struct {
		spec string
		want time.Duration
		ok   bool
	}{
		{"voice:600:30d", 30 * 24 * time.Hour, true},
		{"sms:100:720h", 720 * time.Hour, true},
		{"sms:100", 0, true},
		{"data:1:106751d", 106751 * 24 * time.Hour, true},
		{"data:1:106752d", 0, false}, // the duration would overflow
		{"data:1:9223372036854775807d", 0, false},
		{"data:1:0d", 0, false},
	} {
		b, err := ParseBucket(c.spec)
		if (err == nil) != c.ok || b.Validity != c.want {
			t.Errorf("ParseBucket(%q) = %+v, %v; want validity %v, ok %v", c.spec, b, err, c.want, c.ok)
		}
	}
}
