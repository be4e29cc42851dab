//go:build !race

package cgw

const raceEnabled = false
