package exporter

import "strings"

// The values of the one-hot series: every status text the modules write,
// folded to a fixed set so that a host has exactly one series at 1 per
// status (texts with variable parts, such as "Provisioning In Progress:
// 3/7 stream-image" or "Error: node unhealthy: /var is full", fold to
// their stem). A text none of them matches is "Unknown", and counted in
// eim_exporter_unrecognised_statuses, so a text a module starts writing
// shows up instead of making the host vanish from every series (the
// original's exporter showed 0 everywhere for "Rebooting" and "Downloading
// artifacts").

// statusSet is the values of one status field, "Unknown" last.
type statusSet struct {
	field  string   // the API field, for eim_exporter_unrecognised_statuses
	values []string // index = the folded value
	// prefixes fold texts with a variable tail: "Error: …" → "Error".
	prefixes []string
}

// unknown is the value of a text no module writes (and of an empty one).
const unknown = "Unknown"

var (
	// Host status (host.hostStatus): the host module's liveness and health
	// ("Running", "No Connection", "Rebooting", "Powered Off", "Error: node
	// unhealthy …"), the default "Not Connected", provisioning's
	// "Rebooting" after the install, invalidation's "Invalidated".
	// "Booting" is the original's text for a node starting; EIM does not
	// write it today, the series is kept for dashboards that read it.
	hostStatuses = statusSet{field: "hostStatus",
		values:   []string{"Running", "Booting", "Rebooting", "No Connection", "Not Connected", "Powered Off", "Error", "Invalidated", unknown},
		prefixes: []string{"Error"}}
	// Onboarding status (host.onboardingStatus): the default, and the
	// onboarding module's "Onboarded".
	onboardingStatuses = statusSet{field: "onboardingStatus",
		values: []string{"Not Connected", "Onboarded", unknown}}
	// Provisioning status (instance.provisioningStatus): the default and
	// the provisioning module's texts ("Provisioning In Progress: 3/7
	// stream-image", "Provisioning Failed: 2/7 stream-image: …").
	provisioningStatuses = statusSet{field: "provisioningStatus",
		values:   []string{"Not Provisioned", "Provisioning In Progress", "Provisioned", "Provisioning Failed", unknown},
		prefixes: []string{"Provisioning In Progress", "Provisioning Failed"}}
	// Update status (instance.updateStatus): the default and the texts of
	// the maintenance module's update reports.
	updateStatuses = statusSet{field: "updateStatus",
		values: []string{"No Current Update", "Updating", "Downloading artifacts", "Download complete",
			"Update completed", "Update failed", "No new updates available", unknown}}
)

// The values of a host without an instance: an instance's defaults.
const (
	notProvisioned  = 0 // provisioningStatuses.values[0]
	noCurrentUpdate = 0 // updateStatuses.values[0]
)

// fold returns the index of text's value and whether text was recognised
// ("" is not, but is no surprise either: rows from before a default).
func (s *statusSet) fold(text string) (idx uint8, ok bool) {
	for i, v := range s.values[:len(s.values)-1] {
		if text == v {
			return uint8(i), true
		}
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(text, p+":") {
			for i, v := range s.values {
				if v == p {
					return uint8(i), true
				}
			}
		}
	}
	return uint8(len(s.values) - 1), text == ""
}
