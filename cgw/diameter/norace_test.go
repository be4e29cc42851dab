//go:build !race

package diameter

const raceEnabled = false
