package inventory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// Values of SettingsChange.EnrollmentToken.
const (
	EnrollmentTokenNew  = "new"  // generate a new token (the old one stops working)
	EnrollmentTokenNone = "none" // clear it: unknown devices are refused
)

// MaxDefaultCustomConfigs bounds DefaultCustomConfigIDs.
const MaxDefaultCustomConfigs = 100

// SettingsChange is a partial change of a project's settings: nil fields
// (and an empty EnrollmentToken) keep their value. An empty ID or list
// clears the setting.
type SettingsChange struct {
	DefaultOSID            *string
	DefaultLocalAccountID  *string
	DefaultCustomConfigIDs *[]string
	AutoOnboardEnrolled    *bool
	// HeartbeatIntervalSeconds and HeartbeatTimeoutSeconds: 0 restores
	// the server's default.
	HeartbeatIntervalSeconds *uint32
	HeartbeatTimeoutSeconds  *uint32
	// EnrollmentToken is "", EnrollmentTokenNew or EnrollmentTokenNone.
	EnrollmentToken         string
	OSSecurityFeatureEnable *bool
	// ExporterPerHostOff: see eim.ProjectSettings.
	ExporterPerHostOff *bool
	// EdgeWorkloadsAllowPrivileged: see eim.ProjectSettings.
	EdgeWorkloadsAllowPrivileged *bool
	// PowerPolicy: see eim.ProjectSettings ("" unsets it).
	PowerPolicy *eim.PowerPolicy
	// Description: see eim.ProjectSettings.
	Description *string
}

// UpdateProjectSettings applies ch to the project's settings and returns
// the project after the change and, when ch asked for a new enrollment
// token, the token: it is shown this once, only its hash is stored.
//
// Malformed IDs are EINVALID and references to resources that do not exist
// in the project ENOTFOUND, each naming the field. The references are
// checked before the write, in another transaction (projects are not
// resources of a Tx): a resource deleted in between leaves a dangling
// setting, which the onboarding module reports when it uses it. Two
// concurrent changes of one project's settings may lose one of them.
func (s *Service) UpdateProjectSettings(ctx context.Context, project string, ch SettingsChange) (*eim.Project, string, error) {
	return s.updateSettings(ctx, project, ch, true)
}

// updateSettings is UpdateProjectSettings; syncProvider false leaves the
// default provider alone (it was just deleted).
func (s *Service) updateSettings(ctx context.Context, project string, ch SettingsChange, syncProvider bool) (*eim.Project, string, error) {
	if err := checkProject(project); err != nil {
		return nil, "", err
	}
	if err := checkSettingsChange(ch); err != nil {
		return nil, "", err
	}
	p, err := s.store.FindProject(ctx, project)
	if err != nil {
		return nil, "", err
	}
	if err := s.checkSettingsRefs(ctx, project, ch); err != nil {
		return nil, "", err
	}
	set := p.Settings
	if ch.DefaultOSID != nil {
		set.DefaultOSID = *ch.DefaultOSID
	}
	if ch.DefaultLocalAccountID != nil {
		set.DefaultLocalAccountID = *ch.DefaultLocalAccountID
	}
	if ch.DefaultCustomConfigIDs != nil {
		set.DefaultCustomConfigIDs = nil
		if len(*ch.DefaultCustomConfigIDs) > 0 {
			set.DefaultCustomConfigIDs = slices.Clone(*ch.DefaultCustomConfigIDs)
		}
	}
	if ch.AutoOnboardEnrolled != nil {
		set.AutoOnboardEnrolled = *ch.AutoOnboardEnrolled
	}
	if ch.HeartbeatIntervalSeconds != nil {
		set.HeartbeatIntervalSeconds = *ch.HeartbeatIntervalSeconds
	}
	if ch.HeartbeatTimeoutSeconds != nil {
		set.HeartbeatTimeoutSeconds = *ch.HeartbeatTimeoutSeconds
	}
	if ch.OSSecurityFeatureEnable != nil {
		set.OSSecurityFeatureEnable = *ch.OSSecurityFeatureEnable
	}
	if ch.EdgeWorkloadsAllowPrivileged != nil {
		set.EdgeWorkloadsAllowPrivileged = *ch.EdgeWorkloadsAllowPrivileged
	}
	if ch.ExporterPerHostOff != nil {
		set.ExporterPerHostOff = *ch.ExporterPerHostOff
	}
	if ch.Description != nil {
		set.Description = *ch.Description
	}
	if ch.PowerPolicy != nil {
		set.PowerPolicy = *ch.PowerPolicy
	}
	if err := checkHeartbeat(set); err != nil {
		return nil, "", err
	}
	var token string
	switch ch.EnrollmentToken {
	case EnrollmentTokenNew:
		token, set.EnrollmentTokenHash = newEnrollmentToken()
	case EnrollmentTokenNone:
		set.EnrollmentTokenHash = ""
	}
	p.Settings = set
	if err := s.store.UpdateProject(ctx, p); err != nil {
		return nil, "", err
	}
	// The default provider shows the settings (one source of truth: the
	// settings, which onboarding reads).
	if !syncProvider {
		return p, token, nil
	}
	if err := s.syncDefaultProvider(ctx, project, set); err != nil {
		return nil, "", fmt.Errorf("default provider: %w", err)
	}
	return p, token, nil
}

// CheckDescription checks a project's description (nil: no change): at
// most eim.MaxProjectDescription bytes of UTF-8 without control
// characters.
func CheckDescription(d *string) error {
	if d == nil {
		return nil
	}
	if len(*d) > eim.MaxProjectDescription {
		return eim.Errorf(eim.EINVALID, "description: at most %d bytes, got %d", eim.MaxProjectDescription, len(*d))
	}
	if !utf8.ValidString(*d) || strings.IndexFunc(*d, unicode.IsControl) >= 0 {
		return eim.Errorf(eim.EINVALID, "description: must be UTF-8 text without control characters")
	}
	return nil
}

// checkHeartbeat checks the heartbeat settings together: the timeout must
// cover two intervals (the server's default interval, 10 s, where the
// project sets none).
func checkHeartbeat(set eim.ProjectSettings) error {
	iv, to := set.HeartbeatIntervalSeconds, set.HeartbeatTimeoutSeconds
	if iv != 0 && (iv < eim.MinHeartbeatInterval || iv > eim.MaxHeartbeatInterval) {
		return eim.Errorf(eim.EINVALID, "heartbeatIntervalSeconds: must be 0 (the default) or %d..%d, got %d", eim.MinHeartbeatInterval, eim.MaxHeartbeatInterval, iv)
	}
	if to == 0 {
		return nil
	}
	if to > eim.MaxHeartbeatTimeout {
		return eim.Errorf(eim.EINVALID, "heartbeatTimeoutSeconds: must be 0 (the default) or at most %d, got %d", eim.MaxHeartbeatTimeout, to)
	}
	if iv == 0 {
		iv = eim.DefaultHeartbeatInterval
	}
	if to < 2*iv {
		return eim.Errorf(eim.EINVALID, "heartbeatTimeoutSeconds: must be at least two heartbeat intervals (%d s), got %d", 2*iv, to)
	}
	return nil
}

// checkSettingsChange validates the form of ch (no store access).
func checkSettingsChange(ch SettingsChange) error {
	if err := CheckDescription(ch.Description); err != nil {
		return err
	}
	if ch.PowerPolicy != nil {
		p, err := eim.ParsePowerPolicy("powerPolicy", string(*ch.PowerPolicy))
		if err != nil {
			return err
		}
		if p != *ch.PowerPolicy {
			return eim.Errorf(eim.EINVALID, "powerPolicy: %q: write it as %q", *ch.PowerPolicy, p)
		}
	}
	if ch.DefaultOSID != nil && *ch.DefaultOSID != "" {
		if err := eim.CheckID(eim.KindOS, "defaultOsId", *ch.DefaultOSID); err != nil {
			return err
		}
	}
	if ch.DefaultLocalAccountID != nil && *ch.DefaultLocalAccountID != "" {
		if err := eim.CheckID(eim.KindLocalAccount, "defaultLocalAccountId", *ch.DefaultLocalAccountID); err != nil {
			return err
		}
	}
	if ch.DefaultCustomConfigIDs != nil {
		ids := *ch.DefaultCustomConfigIDs
		if len(ids) > MaxDefaultCustomConfigs {
			return eim.Errorf(eim.EINVALID, "defaultCustomConfigIds: at most %d, got %d", MaxDefaultCustomConfigs, len(ids))
		}
		for i, id := range ids {
			f := fmt.Sprintf("defaultCustomConfigIds[%d]", i)
			if err := eim.CheckID(eim.KindCustomConfig, f, id); err != nil {
				return err
			}
			if slices.Index(ids, id) != i {
				return eim.Errorf(eim.EINVALID, "%s: %q appears more than once", f, id)
			}
		}
	}
	switch ch.EnrollmentToken {
	case "", EnrollmentTokenNew, EnrollmentTokenNone:
	default:
		return eim.Errorf(eim.EINVALID, "enrollmentToken: want %q or %q", EnrollmentTokenNew, EnrollmentTokenNone)
	}
	return nil
}

// checkSettingsRefs checks that the resources ch names exist in project.
func (s *Service) checkSettingsRefs(ctx context.Context, project string, ch SettingsChange) error {
	type ref = settingsRef
	var refs []ref
	if ch.DefaultOSID != nil && *ch.DefaultOSID != "" {
		refs = append(refs, ref{eim.KindOS, "defaultOsId", "OS profile", *ch.DefaultOSID})
	}
	if ch.DefaultLocalAccountID != nil && *ch.DefaultLocalAccountID != "" {
		refs = append(refs, ref{eim.KindLocalAccount, "defaultLocalAccountId", "local account", *ch.DefaultLocalAccountID})
	}
	if ch.DefaultCustomConfigIDs != nil {
		for i, id := range *ch.DefaultCustomConfigIDs {
			refs = append(refs, ref{eim.KindCustomConfig, fmt.Sprintf("defaultCustomConfigIds[%d]", i), "custom config", id})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	return s.store.View(ctx, project, func(tx eim.Tx) error { return settingsRefsIn(ctx, tx, project, refs) })
}

// settingsRef is a resource a settings change names.
type settingsRef struct {
	kind        eim.Kind
	field, noun string
	id          string
}

func settingsRefsIn(ctx context.Context, tx eim.Tx, project string, refs []settingsRef) error {
	for _, r := range refs {
		got, err := tx.Get(ctx, r.kind, r.id)
		if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && got.Base().Project != project) {
			return eim.Errorf(eim.ENOTFOUND, "%s: %s %s not found in project %s", r.field, r.noun, r.id, project)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// newEnrollmentToken returns a new enrollment token (32 random bytes,
// base64url without padding) and the hash stored for it (lower-case hex
// SHA-256 of the token string), as the onboarding module compares them.
func newEnrollmentToken() (token, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	token = base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}
