package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// DefaultProviderName is the provider every project has, as in the
// original: its config is the project's zero-touch provisioning settings,
// which the original's UI and CLI edit there.
const DefaultProviderName = "infra_onboarding"

// providerConfig is the default provider's config JSON, as the original
// wrote it.
type providerConfig struct {
	DefaultOs               string `json:"defaultOs"`
	AutoProvision           bool   `json:"autoProvision"`
	DefaultLocalAccount     string `json:"defaultLocalAccount"`
	OSSecurityFeatureEnable bool   `json:"osSecurityFeatureEnable"`
}

// defaultProviderConfig is the config that shows set.
func defaultProviderConfig(set eim.ProjectSettings) string {
	b, _ := json.Marshal(providerConfig{
		DefaultOs:               set.DefaultOSID,
		AutoProvision:           set.DefaultOSID != "",
		DefaultLocalAccount:     set.DefaultLocalAccountID,
		OSSecurityFeatureEnable: set.OSSecurityFeatureEnable,
	})
	return string(b)
}

// isDefaultProvider reports whether r is a project's default provider.
func isDefaultProvider(r eim.Resource) bool {
	p, ok := r.(*eim.Provider)
	return ok && p.Name == DefaultProviderName
}

// settingsOfProvider is the settings change a write of the default
// provider asks for: zero-touch provisioning with defaultOs when
// autoProvision, else none; the default local account; the security
// feature switch. A config that is not such a JSON object is EINVALID.
func settingsOfProvider(p *eim.Provider) (SettingsChange, error) {
	var cfg providerConfig
	dec := json.NewDecoder(strings.NewReader(p.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return SettingsChange{}, eim.Errorf(eim.EINVALID, "config: the %s provider's config must be a JSON object with defaultOs, autoProvision, defaultLocalAccount and osSecurityFeatureEnable: %v", DefaultProviderName, err)
	}
	osID := ""
	if cfg.AutoProvision {
		if cfg.DefaultOs == "" {
			return SettingsChange{}, eim.Errorf(eim.EINVALID, "config: autoProvision needs a defaultOs")
		}
		osID = cfg.DefaultOs
	}
	ch := SettingsChange{DefaultOSID: &osID, DefaultLocalAccountID: &cfg.DefaultLocalAccount, OSSecurityFeatureEnable: &cfg.OSSecurityFeatureEnable}
	return ch, checkSettingsChange(ch)
}

// syncDefaultProvider makes the project's default provider show set,
// creating it when it is missing.
func (s *Service) syncDefaultProvider(ctx context.Context, project string, set eim.ProjectSettings) error {
	want := defaultProviderConfig(set)
	return s.store.Update(ctx, project, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindProvider, eim.Query{Where: []eim.Cond{{Field: "name", Value: DefaultProviderName}}, Limit: 1, NoTotal: true})
		if err != nil {
			return err
		}
		if len(items) == 0 {
			p := &eim.Provider{Name: DefaultProviderName, ProviderKind: "PROVIDER_KIND_BAREMETAL", APIEndpoint: "null", Config: want}
			normalizeEnums(p)
			return tx.Create(ctx, p)
		}
		p := items[0].(*eim.Provider)
		if p.Config == want {
			return nil
		}
		p.Config = want
		return tx.UpdateFields(ctx, p, "config")
	})
}

// EnsureDefaultProviders gives every project its default provider showing
// its settings (the server calls it at start, for projects made before
// there were default providers).
func (s *Service) EnsureDefaultProviders(ctx context.Context) error {
	ps, err := s.store.ListProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := s.syncDefaultProvider(ctx, p.Name, p.Settings); err != nil {
			return fmt.Errorf("default provider of project %s: %w", p.Name, err)
		}
	}
	return nil
}

// clearZeroTouch turns zero-touch provisioning off in the project's
// settings once its default provider was deleted (leaving it deleted).
func (s *Service) clearZeroTouch(ctx context.Context, project string) error {
	none, off := "", false
	_, _, err := s.updateSettings(ctx, project, SettingsChange{DefaultOSID: &none, DefaultLocalAccountID: &none, OSSecurityFeatureEnable: &off}, false)
	return err
}

// checkDefaultProvider returns the settings change a write of the default
// provider p asks for, its config checked and its references found in the
// project (tx).
func checkDefaultProvider(ctx context.Context, tx eim.Tx, project string, p *eim.Provider) (SettingsChange, error) {
	ch, err := settingsOfProvider(p)
	if err != nil {
		return ch, err
	}
	var refs []settingsRef
	if *ch.DefaultOSID != "" {
		refs = append(refs, settingsRef{eim.KindOS, "config.defaultOs", "OS profile", *ch.DefaultOSID})
	}
	if *ch.DefaultLocalAccountID != "" {
		refs = append(refs, settingsRef{eim.KindLocalAccount, "config.defaultLocalAccount", "local account", *ch.DefaultLocalAccountID})
	}
	return ch, settingsRefsIn(ctx, tx, project, refs)
}

// settleDefaultProvider applies a write of the default provider to the
// project's settings, which then show in the provider (canonically), and
// returns the provider as it is then.
func (s *Service) settleDefaultProvider(ctx context.Context, project string, written eim.Resource, ch SettingsChange) (eim.Resource, error) {
	if _, _, err := s.UpdateProjectSettings(ctx, project, ch); err != nil {
		return nil, err
	}
	return s.Get(ctx, project, eim.KindProvider, written.Base().ResourceID)
}
