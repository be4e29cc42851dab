package scenario

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNotificationsAndUsageFields(t *testing.T) {
	bad := func(yaml, field string) {
		t.Helper()
		_, err := Parse([]byte(yaml))
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Fatalf("%s: %v, want an error naming %s", yaml, err, field)
		}
	}
	bad(`notifications: {reauthorize: 1.5}`, "notifications.reauthorize")
	bad(`notifications: {abort: -0.1}`, "notifications.abort")
	bad(`notifications: {reauthorize: 0.6, abort: 0.6}`, "notifications")
	bad(`notifications: {at: 2}`, "notifications.at")
	bad(`data: {update_on: sometimes}`, "data.update_on")
	bad(`data: {update_on: threshold}`, "data.rate.total_volume")
	bad(`voice: {update_on: threshold}`, "voice.rate.time")
	bad(`data: {rate: {total_volume: 1}}`, "data.rate")
	s, err := Parse([]byte("notifications: {reauthorize: 0.1}\ndata: {update_on: threshold, rate: {total_volume: 1000}}\n"))
	if err != nil || !s.Notifications.Enabled() || s.Notifications.AtOrDefault() != 0.5 || !s.Data.ThresholdDriven() || s.Voice.ThresholdDriven() {
		t.Fatalf("%+v %v", s, err)
	}
	// The defaults hash as before: the new fields are omitted when unset.
	if d := Default(); strings.Contains(string(mustJSON(t, d)), "notifications") || strings.Contains(string(mustJSON(t, d)), "update_on") {
		t.Fatal("unset fields are in the scenario's JSON")
	}
}

func TestGrantInterval(t *testing.T) {
	s := Session{Requested: Units{TotalVolume: 1}, Rate: Units{TotalVolume: 1000}, UpdateOn: UpdateOnThreshold}
	f := func(granted, threshold uint64, validity uint32, wantD time.Duration, wantUse uint64, wantOK bool) {
		t.Helper()
		d, use, ok := s.GrantInterval(granted, threshold, validity)
		if d != wantD || use != wantUse || ok != wantOK {
			t.Fatalf("GrantInterval(%d, %d, %d) = %v, %d, %v; want %v, %d, %v", granted, threshold, validity, d, use, ok, wantD, wantUse, wantOK)
		}
	}
	f(1000, 200, 0, 800*time.Millisecond, 800, true)
	f(1000, 0, 0, time.Second, 1000, true)
	f(1000, 2000, 0, time.Second, 1000, true) // a threshold above the grant: used up
	f(100000, 10, 2, 2*time.Second, 2000, true)
	f(0, 0, 0, 0, 0, false)
	f(1<<62, 0, 0, MaxGrantInterval, uint64(MaxGrantInterval.Seconds())*1000, true)
}

func mustJSON(t *testing.T, s Scenario) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
