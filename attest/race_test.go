//go:build race

package attest_test

// raceEnabled: the firmware proof runs once per CI run, in the step
// without the race detector (it runs QEMU; there is no Go concurrency of
// this package's in it to check).
const raceEnabled = true
