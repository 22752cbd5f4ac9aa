package inventory_test

import (
	"encoding/json"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// TestDefaultProvider: every project has the provider infra_onboarding,
// whose config and the project's settings are one: editing either changes
// both (and what onboarding reads, the settings).
func TestDefaultProvider(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		find := func() *eim.Provider {
			t.Helper()
			p := ok(e.svc.List(e.ctx, e.proj, eim.KindProvider, inventory.ListQuery{Filter: `name="infra_onboarding"`})).get(t)
			if len(p.Items) != 1 {
				t.Fatalf("default provider: got %d, want 1", len(p.Items))
			}
			return p.Items[0].(*eim.Provider)
		}
		type cfg struct {
			DefaultOs               string `json:"defaultOs"`
			AutoProvision           bool   `json:"autoProvision"`
			DefaultLocalAccount     string `json:"defaultLocalAccount"`
			OSSecurityFeatureEnable bool   `json:"osSecurityFeatureEnable"`
		}
		wantCfg := func(what string, want cfg) {
			t.Helper()
			var got cfg
			if err := json.Unmarshal([]byte(find().Config), &got); err != nil || got != want {
				t.Errorf("%s: provider config %s (%v), want %+v", what, find().Config, err, want)
			}
		}
		settings := func() eim.ProjectSettings {
			t.Helper()
			return ok(e.svc.FindProject(e.ctx, e.proj)).get(t).Settings
		}
		p := find()
		if p.ProviderKind != "PROVIDER_KIND_BAREMETAL" || p.APIEndpoint != "null" {
			t.Errorf("default provider: got %+v", p)
		}
		wantCfg("new project", cfg{})

		o1, o2 := e.os("one"), e.os("two")
		la := e.create(&eim.LocalAccount{Username: "ops", SSHKey: sshKey}).(*eim.LocalAccount)
		// Settings → provider.
		_, _, err := e.svc.UpdateProjectSettings(e.ctx, e.proj, inventory.SettingsChange{DefaultOSID: &o1.ResourceID, DefaultLocalAccountID: &la.ResourceID})
		noErr(t, err)
		wantCfg("after the settings", cfg{DefaultOs: o1.ResourceID, AutoProvision: true, DefaultLocalAccount: la.ResourceID})

		// Provider → settings (a PATCH of its config, as the original's UI).
		patch := func(config string) error {
			_, err := e.svc.Update(e.ctx, e.proj, &eim.Provider{Meta: eim.Meta{ResourceID: p.ResourceID}, Config: config}, []string{"config"})
			return err
		}
		noErr(t, patch(`{"defaultOs":"`+o2.ResourceID+`","autoProvision":true,"defaultLocalAccount":"","osSecurityFeatureEnable":true}`))
		if s := settings(); s.DefaultOSID != o2.ResourceID || s.DefaultLocalAccountID != "" || !s.OSSecurityFeatureEnable {
			t.Errorf("settings after the provider: got %+v", s)
		}
		wantCfg("after the provider", cfg{DefaultOs: o2.ResourceID, AutoProvision: true, OSSecurityFeatureEnable: true})
		noErr(t, patch(`{"defaultOs":"`+o2.ResourceID+`","autoProvision":false}`))
		if s := settings(); s.DefaultOSID != "" {
			t.Errorf("autoProvision false: settings' default OS %q, want none", s.DefaultOSID)
		}
		wantCfg("autoProvision false", cfg{})

		wantErr(t, patch(`not json`), eim.EINVALID, "config")
		wantErr(t, patch(`{"autoProvision":true}`), eim.EINVALID, "defaultOs")
		wantErr(t, patch(`{"defaultOs":"os-0000beef","autoProvision":true}`), eim.ENOTFOUND, "config.defaultOs")
		_, err = e.svc.Update(e.ctx, e.proj, &eim.Provider{Meta: eim.Meta{ResourceID: p.ResourceID}, Name: "other"}, []string{"name"})
		wantErr(t, err, eim.EINVALID, "renamed")
		wantCfg("after the refusals", cfg{})

		// The original's clients edit it by deleting it and creating it
		// again: the delete turns zero-touch off, the creation sets it.
		_, _, err = e.svc.UpdateProjectSettings(e.ctx, e.proj, inventory.SettingsChange{DefaultOSID: &o1.ResourceID})
		noErr(t, err)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindProvider, p.ResourceID))
		if s := settings(); s.DefaultOSID != "" {
			t.Errorf("settings after the default provider's delete: default OS %q, want none", s.DefaultOSID)
		}
		if n := ok(e.svc.List(e.ctx, e.proj, eim.KindProvider, inventory.ListQuery{})).get(t).Total; n != 0 {
			t.Errorf("providers after the delete: got %d, want 0", n)
		}
		e.create(&eim.Provider{Name: "infra_onboarding", ProviderKind: "PROVIDER_KIND_BAREMETAL", APIEndpoint: "null",
			Config: `{"defaultOs":"` + o2.ResourceID + `","autoProvision":true,"defaultLocalAccount":"` + la.ResourceID + `","osSecurityFeatureEnable":false}`})
		if s := settings(); s.DefaultOSID != o2.ResourceID || s.DefaultLocalAccountID != la.ResourceID {
			t.Errorf("settings after the default provider's creation: got %+v", s)
		}
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Provider{Name: "infra_onboarding", ProviderKind: "PROVIDER_KIND_BAREMETAL", APIEndpoint: "null", Config: `{}`})
		wantErr(t, err, eim.ECONFLICT)

		// A project whose default provider is missing (made before) gets it.
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindProvider, find().ResourceID) }))
		noErr(t, e.svc.EnsureDefaultProviders(e.ctx))
		wantCfg("recreated at start", cfg{DefaultOs: o2.ResourceID, AutoProvision: true, DefaultLocalAccount: la.ResourceID})

		// An otherwise empty project may be deleted without force.
		empty := e.newProject()
		noErr(t, e.svc.DeleteProject(e.ctx, empty, false))
	})
}
