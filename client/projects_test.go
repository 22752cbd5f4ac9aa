package client_test

import (
	"context"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

func TestProjectSettings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.admin
	p, err := c.CreateProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var os eim.OS
	if err := c.Create(ctx, "acme", eim.KindOS, map[string]any{"name": "ubuntu", "profileName": "ubuntu", "osType": "OS_TYPE_MUTABLE",
		"sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, &os); err != nil {
		t.Fatal(err)
	}
	osID, yes := os.ResourceID, true
	got, err := c.UpdateProjectSettings(ctx, "acme", client.SettingsChange{DefaultOSID: &osID, AutoOnboardEnrolled: &yes, EnrollmentToken: "new"})
	if err != nil {
		t.Fatalf("UpdateProjectSettings: %v", err)
	}
	if got.ID != p.ID || got.Settings.DefaultOSID != osID || !got.Settings.AutoOnboardEnrolled || !got.Settings.Enrollment || len(got.EnrollmentToken) != 43 {
		t.Fatalf("UpdateProjectSettings: got %+v", got)
	}
	rw := e.clientWith(t, p.ID+"_im-rw")
	none := ""
	if got, err = rw.UpdateProjectSettings(ctx, "acme", client.SettingsChange{DefaultOSID: &none, EnrollmentToken: "none"}); err != nil {
		t.Fatalf("UpdateProjectSettings with the rw role: %v", err)
	}
	if got.Settings.DefaultOSID != "" || got.Settings.Enrollment || got.EnrollmentToken != "" || !got.Settings.AutoOnboardEnrolled {
		t.Fatalf("after clearing: got %+v", got)
	}
	ro := e.clientWith(t, p.ID+"_im-r")
	if g, err := ro.GetProject(ctx, "acme"); err != nil || g.Name != "acme" || g.Settings.DefaultOSID != "" {
		t.Fatalf("GetProject: got %+v, %v", g, err)
	}
	if _, err := ro.UpdateProjectSettings(ctx, "acme", client.SettingsChange{AutoOnboardEnrolled: &yes}); eim.ErrorCode(err) != eim.EFORBIDDEN {
		t.Fatalf("read-only change: got %v, want %s", err, eim.EFORBIDDEN)
	}
	missing := "os-0000beef"
	if _, err := c.UpdateProjectSettings(ctx, "acme", client.SettingsChange{DefaultOSID: &missing}); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("missing OS: got %v, want %s", err, eim.ENOTFOUND)
	}
	if _, err := c.GetProject(ctx, "nosuch"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("GetProject nosuch: got %v, want %s", err, eim.ENOTFOUND)
	}
}
