package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: the
// server started through Main must stop everything it started. With
// EIM_TEST_CHILD_SERVER=1 the binary is instead the server process of the
// kill tests (kill_e2e_test.go), re-executed with the server's arguments.
func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) == "1" {
		os.Exit(runChildServer())
	}
	goleak.VerifyTestMain(m)
}
