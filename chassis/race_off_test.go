//go:build !race

package chassis

const raceEnabled = false
