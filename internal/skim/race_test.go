//go:build race

package skim

// raceEnabled: the race detector makes sync.Pool drop what it is given.
const raceEnabled = true
