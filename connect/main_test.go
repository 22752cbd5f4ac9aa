package connect_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a tunnel, a gateway's loop or an agent
// leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
