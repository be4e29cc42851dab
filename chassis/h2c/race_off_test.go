//go:build !race

package h2c

const raceEnabled = false
