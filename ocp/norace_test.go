//go:build !race

package ocp

const raceEnabled = false
