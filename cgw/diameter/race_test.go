//go:build race

package diameter

// raceEnabled is set under -race, where sync.Pool drops items at random
// and allocation counts mean nothing.
const raceEnabled = true
