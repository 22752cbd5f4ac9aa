package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: the
// server started through Main must stop everything it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
