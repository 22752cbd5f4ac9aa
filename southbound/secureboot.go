package southbound

import (
	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// SecureBootState is the inventory's name of a Secure Boot state a node
// reported (at Discover and with its request for the workflow: the
// protocol's enum has the same names). A value unknown to this server (a
// newer agent's) is UNSPECIFIED.
func SecureBootState(s provisioningv1.SecureBootState) eim.SecureBootState {
	v := eim.SecureBootState(s.String())
	for _, name := range v.Values() {
		if string(v) == name {
			return v
		}
	}
	return eim.SecureBootStateUnspecified
}
