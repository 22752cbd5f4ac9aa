//go:build race

package luks2_test

// raceEnabled: the VM test runs once per CI run, in the step without the
// race detector (it runs QEMU; no Go concurrency of this package's is in
// it to check).
const raceEnabled = true
