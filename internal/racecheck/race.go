//go:build race

package racecheck

// Enabled says whether this binary was built with the race detector.
const Enabled = true
