package main

import "testing"

// TestCheckMoneyUsage: bad flags are usage errors (exit 2), named, before
// anything starts.
func TestCheckMoneyUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--accounts", "0"},
		{"--accounts", "65"},
		{"--faults", "explode"},
		{"--faults", "kill:nothing"},
		{"--avoid", "no-such-defect"},
		{"--rate", "0"},
		{"--rate", "501"},
		{"--duration", "0s"},
		{"--ops", "-1"},
		{"--cdr", "maybe"},
		{"--balance", "0"},
		{"--fault-interval", "1ms"},
		{"--log-level", "loud"},
		{"extra"},
	} {
		if code := dispatch(append([]string{"check-money"}, args...)); code != exitUsage {
			t.Errorf("check-money %v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code := dispatch([]string{"check-money", "--help"}); code != 0 {
		t.Errorf("check-money --help: exit %d, want 0", code)
	}
}
