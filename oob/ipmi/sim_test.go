package ipmi_test

import (
	"testing"
	"time"

	"github.com/eimhq/eim/internal/ipmisim"
	"github.com/eimhq/eim/oob/ipmi"
)

// The test BMC is internal/ipmisim's (shared with cmd/eim's end-to-end
// test of power jobs); these names keep this package's tests short.

const (
	simUser     = ipmisim.User
	simPassword = ipmisim.Password
)

type simConfig = ipmisim.Config

type sim struct{ *ipmisim.Sim }

func requireIPMI(t *testing.T) { ipmisim.Require(t) }

func startSim(t *testing.T, cfg simConfig) *sim { return &sim{ipmisim.Start(t, cfg)} }

func (s *sim) bmc(t *testing.T, d *ipmi.Driver, password string, timeout time.Duration) *ipmi.BMC {
	return s.BMC(t, d, password, timeout)
}

func (s *sim) actions(t *testing.T) []string { return s.Actions(t) }

func freeUDPPort(t *testing.T) int { return ipmisim.FreeUDPPort(t) }

func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	ipmisim.Eventually(t, d, what, cond)
}
