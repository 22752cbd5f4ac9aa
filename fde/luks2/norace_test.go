//go:build !race

package luks2_test

const raceEnabled = false
