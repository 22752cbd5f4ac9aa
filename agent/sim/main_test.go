package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a fleet run leaves goroutines behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
