//go:build race

package ocp

// raceEnabled is true under the race detector, which makes sync.Pool drop
// items at random: allocation counts are meaningless then.
const raceEnabled = true
