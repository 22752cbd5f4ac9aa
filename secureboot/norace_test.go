//go:build !race

package secureboot_test

const raceEnabled = false
