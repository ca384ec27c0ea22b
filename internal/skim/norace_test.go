//go:build !race

package skim

const raceEnabled = false
