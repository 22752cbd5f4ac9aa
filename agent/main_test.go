package agent_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/eimhq/eim/internal/podmantest"
)

func TestMain(m *testing.M) {
	// The podman tests' pods in a storage of this process's own: the agent
	// under test removes every workload pod it was not given.
	dir, err := os.MkdirTemp("", "eim-agent-podman-")
	if err != nil {
		panic(err)
	}
	cleanup, err := podmantest.Isolate(dir)
	if err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(code int) { cleanup(); os.Exit(code) }),
		// Idle keep-alive connections of the test clients.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
