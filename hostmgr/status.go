package hostmgr

import (
	"strings"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// The host statuses of this module (the original's strings where it had
// them).
const (
	statusRunning      = "Running"
	statusNoConnection = "No Connection"
	statusRebooting    = "Rebooting"
	statusPoweredOff   = "Powered Off"
	statusNotConnected = "Not Connected" // a host's default
	// statusUnhealthy prefixes the status of a node that says it is
	// unhealthy: "Error: node unhealthy: /var is full".
	statusUnhealthy = "Error: "
)

// hostStatus is a status text and its indicator.
type hostStatus struct {
	text      string
	indicator eim.StatusIndication
}

// healthStatus is the status a heartbeat asks for: "Running", or an error
// when the node or its agent says it is unhealthy. DEGRADED is still
// "Running": the host works.
func healthStatus(m *hostv1.HeartbeatRequest) hostStatus {
	for _, p := range []struct {
		what string
		h    *hostv1.Health
	}{{"node", m.NodeHealth}, {"agent", m.AgentHealth}} {
		if p.h.GetState() == hostv1.Health_STATE_UNHEALTHY {
			text := statusUnhealthy + p.what + " unhealthy"
			if p.h.GetDetail() != "" {
				text += ": " + p.h.GetDetail()
			}
			return hostStatus{text, eim.StatusError}
		}
	}
	return hostStatus{statusRunning, eim.StatusIdle}
}

// ours reports whether a host status is this module's to change when a
// node calls: the node's liveness and health, and the defaults before it.
// Other modules' statuses (invalidation, deletion, provisioning) are left
// alone.
func ours(status string) bool {
	switch status {
	case "", statusNotConnected, statusRunning, statusNoConnection, statusRebooting, statusPoweredOff:
		return true
	}
	return isUnhealthy(status)
}

func isUnhealthy(status string) bool {
	return strings.HasPrefix(status, statusUnhealthy+"node unhealthy") || strings.HasPrefix(status, statusUnhealthy+"agent unhealthy")
}

// timesOut reports whether a host with this status becomes "No Connection"
// when its heartbeats stop. A host rebooting has its own, longer timeout;
// one powered off on request is expected to be silent.
func timesOut(status string) bool {
	return status == statusRunning || isUnhealthy(status)
}
