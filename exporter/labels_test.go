package exporter

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/onboarding"
)

// FuzzLabels: whatever a host's name, hostname, serial or UUID hold (the
// node reports its hostname), a per-host line parses back, through the
// library's parser, to those values (invalid UTF-8 replaced), and nothing
// in them adds a series or a family.
func FuzzLabels(f *testing.F) {
	f.Add("node-1", "node-1.example", "ABCDE12345", "3f0c6f9e-2b1a-4c55-9a7e-0d8f2c1b4e6a")
	f.Add(`evil"name`, "a\nb", `back\slash`, "}{")
	f.Add("# HELP edge_host_status x", "\n# TYPE x counter\nx 1", `\"`, "\xff\xfe")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, name, hostname, serial, uuid string) {
		h := hostview.NewHost(&eim.Host{Meta: eim.Meta{ResourceID: "host-0000abcd"}, Name: name, Hostname: hostname, SerialNumber: serial, UUID: uuid}, nil)
		const pid = "00000000-0000-4000-8000-000000000001"
		labels := appendLabels(nil, h, pid)
		// As the library writes them.
		if want := renderLabels([]string{"hostID", h.ID(), "deviceGuid", uuid, "name", name, "hostname", hostname, "serial", serial, "projectId", pid}); !bytes.Equal(labels, want) {
			t.Fatalf("labels %q, the library writes %q", labels, want)
		}
		fam := hostFamilies[0]
		var b bytes.Buffer
		b.Write(fam.header)
		for i, v := range fam.values {
			b.WriteString(fam.name + "{")
			b.Write(labels)
			b.Write(v)
			b.WriteString("} ")
			b.WriteString(map[bool]string{true: "1", false: "0"}[i == 0])
			b.WriteByte('\n')
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(&b)
		if err != nil {
			t.Fatalf("does not parse: %v\n%s", err, b.String())
		}
		if len(fams) != 1 || fams[fam.name] == nil || len(fams[fam.name].Metric) != len(fam.values) {
			t.Fatalf("got families %v, want %s with %d series", fams, fam.name, len(fam.values))
		}
		valid := func(s string) string { return strings.ToValidUTF8(s, string(utf8.RuneError)) }
		want := map[string]string{"hostID": h.ID(), "deviceGuid": valid(uuid), "name": valid(name), "hostname": valid(hostname),
			"serial": valid(serial), "projectId": "00000000-0000-4000-8000-000000000001"}
		for i, m := range fams[fam.name].Metric {
			got := map[string]string{}
			for _, lp := range m.Label {
				got[lp.GetName()] = lp.GetValue()
			}
			if got["status"] != fam.set.values[i] {
				t.Fatalf("series %d: status %q, want %q", i, got["status"], fam.set.values[i])
			}
			delete(got, "status")
			if len(got) != len(want) {
				t.Fatalf("labels %q, want %q", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("label %s: got %q, want %q", k, got[k], v)
				}
			}
		}
	})
}

// TestFold: every status text the modules write folds to its own value,
// texts with a variable tail to their stem, anything else to Unknown.
func TestFold(t *testing.T) {
	for _, c := range []struct {
		set        *statusSet
		text, want string
		ok         bool
	}{
		// hostmgr, provisioning, inventory (invalidation, the defaults).
		{&hostStatuses, "Running", "Running", true},
		{&hostStatuses, "No Connection", "No Connection", true},
		{&hostStatuses, "Rebooting", "Rebooting", true},
		{&hostStatuses, "Powered Off", "Powered Off", true},
		{&hostStatuses, "Not Connected", "Not Connected", true},
		{&hostStatuses, "Invalidated", "Invalidated", true},
		{&hostStatuses, "Error: node unhealthy: /var is full", "Error", true},
		{&hostStatuses, "Error: agent unhealthy", "Error", true},
		{&hostStatuses, "Booting", "Booting", true},
		{&hostStatuses, "", "Unknown", true},
		{&hostStatuses, "Errorless", "Unknown", false},
		// onboarding, the default.
		{&onboardingStatuses, "Onboarded", "Onboarded", true},
		{&onboardingStatuses, "Not Connected", "Not Connected", true},
		{&onboardingStatuses, "Onboarding", "Unknown", false},
		// provisioning, the default.
		{&provisioningStatuses, "Not Provisioned", "Not Provisioned", true},
		{&provisioningStatuses, "Provisioning In Progress: 3/7 stream-image", "Provisioning In Progress", true},
		{&provisioningStatuses, "Provisioned", "Provisioned", true},
		{&provisioningStatuses, "Provisioning Failed: 2/7 stream-image: timed out after 9800s", "Provisioning Failed", true},
		{&provisioningStatuses, "Provisioning Failed: cannot render", "Provisioning Failed", true},
		// maintenance's update reports, the default.
		{&updateStatuses, "No Current Update", "No Current Update", true},
		{&updateStatuses, "Updating", "Updating", true},
		{&updateStatuses, "Downloading artifacts", "Downloading artifacts", true},
		{&updateStatuses, "Download complete", "Download complete", true},
		{&updateStatuses, "Update completed", "Update completed", true},
		{&updateStatuses, "Update failed", "Update failed", true},
		{&updateStatuses, "No new updates available", "No new updates available", true},
		{&updateStatuses, "Rolling back", "Unknown", false},
	} {
		i, ok := c.set.fold(c.text)
		if got := c.set.values[i]; got != c.want || ok != c.ok {
			t.Errorf("%s %q: got %q (recognised %v), want %q (%v)", c.set.field, c.text, got, ok, c.want, c.ok)
		}
	}
}

// TestFoldExported: the texts the modules export as constants are known
// (the others are in TestFold's table, found in their sources).
func TestFoldExported(t *testing.T) {
	for _, c := range []struct {
		set  *statusSet
		text string
	}{
		{&hostStatuses, inventory.StatusNotConnected}, {&hostStatuses, inventory.StatusRunning}, {&hostStatuses, inventory.StatusInvalidated},
		{&onboardingStatuses, inventory.StatusNotConnected}, {&onboardingStatuses, onboarding.StatusOnboarded},
		{&provisioningStatuses, inventory.StatusNotProvisioned},
		{&updateStatuses, inventory.StatusNoCurrentUpdate}, {&updateStatuses, eim.UpdateStatusNone}, {&updateStatuses, eim.UpdateStatusUpdating},
		{&updateStatuses, eim.UpdateStatusDone}, {&updateStatuses, eim.UpdateStatusFailed}, {&updateStatuses, eim.UpdateStatusUpToDate},
	} {
		if i, ok := c.set.fold(c.text); !ok || c.set.values[i] != c.text {
			t.Errorf("%s %q: folds to %q", c.set.field, c.text, c.set.values[i])
		}
	}
	if statusRegistered != onboarding.StatusRegistered {
		t.Errorf("the registration text: %q, the onboarding module writes %q", statusRegistered, onboarding.StatusRegistered)
	}
}
