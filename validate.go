package eim

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Validate checks a resource against the rules of its kind: the patterns,
// lengths, ranges and enums of the northbound API's schemas, and the
// well-formedness of the IDs it references. It does not look anything up
// (that a referenced resource exists is the inventory's job). The error is an
// EINVALID *Error naming the field by its wire name.
func Validate(r Resource) error {
	switch r := r.(type) {
	case *Region:
		return validateRegion(r)
	case *Site:
		return validateSite(r)
	case *Host:
		return validateHost(r)
	case *Instance:
		return validateInstance(r)
	case *OS:
		return validateOS(r)
	case *Provider:
		return validateProvider(r)
	case *SingleSchedule:
		return validateSingleSchedule(r)
	case *RepeatedSchedule:
		return validateRepeatedSchedule(r)
	case *LocalAccount:
		return validateLocalAccount(r)
	case *CustomConfig:
		return validateCustomConfig(r)
	case *TelemetryGroup:
		return validateTelemetryGroup(r)
	case *TelemetryProfile:
		return validateTelemetryProfile(r)
	case *OSUpdatePolicy:
		return validateOSUpdatePolicy(r)
	case *OSUpdateRun:
		return validateOSUpdateRun(r)
	case *Workload:
		return validateWorkload(r)
	case *WorkloadMember:
		return validateWorkloadMember(r)
	case nil:
		return Errorf(EINVALID, "resource is missing")
	}
	return Errorf(EINVALID, "unknown resource kind %q", r.ResourceKind())
}

// Patterns of the API's schemas. Go's RE2 accepts them as written.
var (
	reName        = regexp.MustCompile(`^[a-zA-Z-_0-9./: ]*$`)
	reUUID        = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	reUUIDOpt     = regexp.MustCompile(`^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	reSerial      = regexp.MustCompile(`^([A-Za-z0-9]{5,20})?$`)
	reNote        = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=@?!#,<>*()" ]*$`)
	reMetaKey     = regexp.MustCompile(`^[a-z.]+/$|^[a-z.]+/[a-z0-9][a-z0-9-_.]*[a-z0-9]$|^[a-z.]+/[a-z0-9]$|^[a-z]$|^[a-z0-9][a-z0-9-_.]*[a-z0-9]$`)
	reMetaValue   = regexp.MustCompile(`^$|^[a-z0-9]$|^[a-z0-9][a-z0-9._-]*[a-z0-9]$`)
	reOSName      = regexp.MustCompile(`^[a-zA-Z-_0-9./: ()]*$`)
	reText        = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=@?!#,<>*()" ]*$`)
	reOSDesc      = regexp.MustCompile("^[a-zA-Z-_0-9.:;=@?!#,<>*(){}&%$`^\\+\\- ]*$")
	reSha256      = regexp.MustCompile(`^[a-f0-9]{64}$`)
	reOSMetadata  = regexp.MustCompile(`^[a-z0-9,.\-_:/"\\ \n{}\[\]]*$`)
	reBase64      = regexp.MustCompile(`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`)
	reEndpoint    = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=?@!#,<>*() ]*$`)
	reCredential  = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=?@!#,<>*(){}"\\ ]*$`)
	reUsername    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	reSSHKey      = regexp.MustCompile(`^(ssh-ed25519|ecdsa-sha2-nistp521) ([A-Za-z0-9+/=]+) ?(.*)?$`)
	reCronMinutes = regexp.MustCompile(`^([*]|([0-9]|([1-5][0-9]))((,([0-9]|([1-5][0-9])))*))$`)
	reCronHours   = regexp.MustCompile(`^([*]|([0-9]|1[0-9]|2[0-3])((,([0-9]|1[0-9]|2[0-3]))*))$`)
	reCronDom     = regexp.MustCompile(`^([*]|([1-9]|([12][0-9])|3[01])((,([1-9]|([12][0-9])|3[01]))*))$`)
	reCronMonth   = regexp.MustCompile(`^([*]|([1-9]|1[012])((,([1-9]|1[012]))*))$`)
	reCronDow     = regexp.MustCompile(`^([*]|([0-6])((,([0-6]))*))$`)
	reTelGroup    = regexp.MustCompile(`^[a-zA-Z-_0-9.:;=@?!#*()"\ ]+$`)
)

// Limits of the API's schemas.
const (
	MaxMetadataItems   = 100
	MaxScheduleSeconds = 86400
	maxStatusLen       = 1024
)

// v collects the checks of one resource and keeps the first failure.
type v struct{ err error }

func (c *v) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = Errorf(EINVALID, "%s: %s", field, fmt.Sprintf(format, args...))
	}
}

func (c *v) add(err error) {
	if c.err == nil && err != nil {
		c.err = err
	}
}

// str checks a string's length (in characters) and pattern.
func (c *v) str(field, s string, max int, re *regexp.Regexp) {
	if n := utf8.RuneCountInString(s); max > 0 && n > max {
		c.fail(field, "is %d characters long, at most %d allowed", n, max)
		return
	}
	if re != nil && !re.MatchString(s) {
		c.fail(field, "%q does not match %s", s, re)
	}
}

func (c *v) required(field, s string) {
	if s == "" {
		c.fail(field, "is required")
	}
}

// id checks an optional reference: empty, or a well-formed ID of kind k.
func (c *v) id(k Kind, field, id string) {
	if id != "" {
		c.add(CheckID(k, field, id))
	}
}

func (c *v) self(k Kind, m *Meta) { c.id(k, "resourceId", m.ResourceID) }

func (c *v) metadata(field string, md Metadata) {
	if len(md) > MaxMetadataItems {
		c.fail(field, "has %d items, at most %d allowed", len(md), MaxMetadataItems)
		return
	}
	seen := make(map[string]bool, len(md))
	for i, it := range md {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it.Key == "" {
			c.fail(f+".key", "is required")
			return
		}
		c.pair(f, it)
		if strings.HasPrefix(it.Key, DeviceLabelPrefix) {
			c.fail(f+".key", "%q: the prefix %s is reserved for the labels EIM derives from what it knows of a device", it.Key, DeviceLabelPrefix)
		}
		if seen[it.Key] {
			c.fail(f+".key", "%q appears more than once", it.Key)
		}
		seen[it.Key] = true
	}
}

// pair checks one metadata item's key and value.
func (c *v) pair(field string, it MetadataItem) {
	c.str(field+".key", it.Key, 316, reMetaKey)
	c.str(field+".value", it.Value, 63, reMetaValue)
}

// CheckMetadataItem checks one label as the items of a resource's metadata
// are checked: a key is required, and key and value follow the patterns
// and lengths of the original's schemas. field names it in the error.
func CheckMetadataItem(field string, it MetadataItem) error {
	var c v
	if it.Key == "" {
		c.fail(field+".key", "is required")
	}
	c.pair(field, it)
	return c.err
}

// statuses checks the lengths of status texts, given as name, value pairs.
func (c *v) statuses(pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		c.str(pairs[i], pairs[i+1], maxStatusLen, nil)
	}
}

func validateRegion(r *Region) error {
	var c v
	c.self(KindRegion, &r.Meta)
	c.str("name", r.Name, 50, reName)
	c.id(KindRegion, "parentId", r.ParentID)
	if r.ParentID != "" && r.ParentID == r.ResourceID {
		c.fail("parentId", "a region cannot be its own parent")
	}
	c.metadata("metadata", r.Metadata)
	return c.err
}

func validateSite(s *Site) error {
	var c v
	c.self(KindSite, &s.Meta)
	c.str("name", s.Name, 50, reName)
	c.id(KindRegion, "regionId", s.RegionID)
	if s.SiteLat < -900000000 || s.SiteLat > 900000000 {
		c.fail("siteLat", "%d is out of range [-900000000, 900000000] (degrees × 10^7)", s.SiteLat)
	}
	if s.SiteLng < -1800000000 || s.SiteLng > 1800000000 {
		c.fail("siteLng", "%d is out of range [-1800000000, 1800000000] (degrees × 10^7)", s.SiteLng)
	}
	if p, err := ParsePowerPolicy("powerPolicy", string(s.PowerPolicy)); err != nil || p != s.PowerPolicy {
		c.fail("powerPolicy", "%q is not one of %s (or empty: unset)", s.PowerPolicy, strings.Join(PowerPolicies(), ", "))
	}
	c.metadata("metadata", s.Metadata)
	return c.err
}

func validateHost(h *Host) error {
	var c v
	c.self(KindHost, &h.Meta)
	// A name may be empty, as the original accepts it.
	c.str("name", h.Name, 50, reName)
	if h.UUID == "" && h.SerialNumber == "" {
		c.fail("uuid", "a uuid or a serialNumber is required")
	}
	c.str("uuid", h.UUID, 36, reUUIDOpt)
	c.str("serialNumber", h.SerialNumber, 20, reSerial)
	c.str("note", h.Note, 512, reNote)
	c.id(KindSite, "siteId", h.SiteID)
	c.id(KindProvider, "providerId", h.ProviderID)
	c.str("amtDnsSuffix", h.AmtDNSSuffix, 1024, nil)
	c.statuses("hostStatus", h.HostStatus, "onboardingStatus", h.OnboardingStatus,
		"registrationStatus", h.RegistrationStatus, "powerStatus", h.PowerStatus,
		"amtStatus", h.AmtStatus, "kvmSessionStatus", h.KvmSessionStatus, "solSessionStatus", h.SolSessionStatus)
	c.add(checkEnum("desiredState", h.DesiredState))
	c.add(checkEnum("currentState", h.CurrentState))
	c.add(checkEnum("bmcKind", h.BmcKind))
	c.add(checkEnum("desiredPowerState", h.DesiredPowerState))
	c.add(checkEnum("currentPowerState", h.CurrentPowerState))
	c.add(checkEnum("powerStatusIndicator", h.PowerStatusIndicator))
	c.add(checkEnum("powerCommandPolicy", h.PowerCommandPolicy))
	c.add(checkEnum("hostStatusIndicator", h.HostStatusIndicator))
	c.add(checkEnum("onboardingStatusIndicator", h.OnboardingStatusIndicator))
	c.add(checkEnum("registrationStatusIndicator", h.RegistrationStatusIndicator))
	c.add(checkEnum("amtSku", h.AmtSku))
	c.add(checkEnum("desiredAmtState", h.DesiredAmtState))
	c.add(checkEnum("currentAmtState", h.CurrentAmtState))
	c.add(checkEnum("amtStatusIndicator", h.AmtStatusIndicator))
	c.add(checkEnum("amtControlMode", h.AmtControlMode))
	c.add(checkEnum("kvmStatus", h.KvmStatus))
	c.add(checkEnum("desiredKvmState", h.DesiredKvmState))
	c.add(checkEnum("currentKvmState", h.CurrentKvmState))
	c.add(checkEnum("solStatus", h.SolStatus))
	c.add(checkEnum("desiredSolState", h.DesiredSolState))
	c.add(checkEnum("currentSolState", h.CurrentSolState))
	c.add(checkEnum("secureBootState", h.SecureBootState))
	c.metadata("metadata", h.Metadata)
	return c.err
}

func validateInstance(in *Instance) error {
	var c v
	c.self(KindInstance, &in.Meta)
	c.str("name", in.Name, 50, reName)
	c.required("hostID", in.HostID)
	c.id(KindHost, "hostID", in.HostID)
	c.required("osID", in.OSID)
	c.id(KindOS, "osID", in.OSID)
	c.id(KindLocalAccount, "localAccountID", in.LocalAccountID)
	c.id(KindOSUpdatePolicy, "osUpdatePolicyID", in.OSUpdatePolicyID)
	seen := map[string]bool{}
	for i, id := range in.CustomConfigIDs {
		f := fmt.Sprintf("customConfigID[%d]", i)
		c.required(f, id)
		c.id(KindCustomConfig, f, id)
		if seen[id] {
			c.fail(f, "%q appears more than once", id)
		}
		seen[id] = true
	}
	c.statuses("instanceStatus", in.InstanceStatus, "provisioningStatus", in.ProvisioningStatus,
		"updateStatus", in.UpdateStatus, "trustedAttestationStatus", in.TrustedAttestationStatus,
		"instanceStatusDetail", in.InstanceStatusDetail)
	c.add(checkEnum("kind", in.Kind))
	c.add(checkEnum("desiredState", in.DesiredState))
	c.add(checkEnum("currentState", in.CurrentState))
	c.add(checkEnum("securityFeature", in.SecurityFeature))
	c.add(checkEnum("instanceStatusIndicator", in.InstanceStatusIndicator))
	c.add(checkEnum("provisioningStatusIndicator", in.ProvisioningStatusIndicator))
	c.add(checkEnum("updateStatusIndicator", in.UpdateStatusIndicator))
	c.add(checkEnum("trustedAttestationStatusIndicator", in.TrustedAttestationStatusIndicator))
	return c.err
}

func validateOS(o *OS) error {
	var c v
	c.self(KindOS, &o.Meta)
	c.str("name", o.Name, 128, reOSName)
	c.str("architecture", o.Architecture, 20, reText)
	c.str("imageUrl", o.ImageURL, 500, reText)
	c.str("imageId", o.ImageID, 500, reText)
	c.str("description", o.Description, 1000, reOSDesc)
	c.required("sha256", o.Sha256)
	c.str("sha256", o.Sha256, 64, reSha256)
	c.str("profileName", o.ProfileName, 128, reText)
	c.str("installedPackagesUrl", o.InstalledPackagesURL, 200, nil)
	c.str("metadata", o.Metadata, 500, reOSMetadata)
	c.str("tlsCaCert", o.TLSCaCert, 10000, reBase64)
	c.str("existingCvesUrl", o.ExistingCvesURL, 500, nil)
	c.str("fixedCvesUrl", o.FixedCvesURL, 500, nil)
	c.str("repoUrl", o.RepoURL, 500, reText)
	c.add(checkEnum("securityFeature", o.SecurityFeature))
	c.add(checkEnum("osType", o.OsType))
	c.add(checkEnum("osProvider", o.OsProvider))
	return c.err
}

func validateProvider(p *Provider) error {
	var c v
	c.self(KindProvider, &p.Meta)
	c.required("providerKind", string(p.ProviderKind))
	c.add(checkEnum("providerKind", p.ProviderKind))
	c.add(checkEnum("providerVendor", p.ProviderVendor))
	c.required("name", p.Name)
	c.str("name", p.Name, 40, reName)
	c.required("apiEndpoint", p.APIEndpoint)
	c.str("apiEndpoint", p.APIEndpoint, 500, reEndpoint)
	if len(p.APICredentials) > 100 {
		c.fail("apiCredentials", "has %d items, at most 100 allowed", len(p.APICredentials))
	}
	for i, cred := range p.APICredentials {
		c.str(fmt.Sprintf("apiCredentials[%d]", i), cred, 500, reCredential)
	}
	c.str("config", p.Config, 2000, reCredential)
	return c.err
}

func validateLocalAccount(a *LocalAccount) error {
	var c v
	c.self(KindLocalAccount, &a.Meta)
	c.required("username", a.Username)
	c.str("username", a.Username, 32, reUsername)
	c.required("sshKey", a.SSHKey)
	c.str("sshKey", a.SSHKey, 800, reSSHKey)
	return c.err
}

func validateCustomConfig(cc *CustomConfig) error {
	var c v
	c.self(KindCustomConfig, &cc.Meta)
	c.required("name", cc.Name)
	c.str("name", cc.Name, 40, reUsername)
	c.str("description", cc.Description, 256, reText)
	c.required("config", cc.Config)
	c.str("config", cc.Config, 16384, nil)
	return c.err
}

// scheduleTargets checks that at most one target is set, as the API's
// schemas say ("only one target can be provided per schedule"). None is
// allowed, as in the original (a schedule whose target was cleared): it
// applies to nothing.
func (c *v) scheduleTargets(host, site, region string) {
	n := 0
	for _, t := range []string{host, site, region} {
		if t != "" {
			n++
		}
	}
	if n > 1 {
		c.fail("targetHostId", "only one of targetHostId, targetSiteId, targetRegionId may be set, got %d", n)
	}
	c.id(KindHost, "targetHostId", host)
	c.id(KindSite, "targetSiteId", site)
	c.id(KindRegion, "targetRegionId", region)
}

func validateSingleSchedule(s *SingleSchedule) error {
	var c v
	c.self(KindSingleSchedule, &s.Meta)
	c.str("name", s.Name, 50, reName)
	specified(&c, "scheduleStatus", s.ScheduleStatus)
	if s.StartSeconds < 1 {
		c.fail("startSeconds", "is required (a UNIX time in seconds ≥ 1)")
	}
	if s.EndSeconds != 0 && s.EndSeconds <= s.StartSeconds {
		c.fail("endSeconds", "%d must be after startSeconds %d", s.EndSeconds, s.StartSeconds)
	}
	c.scheduleTargets(s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
	return c.err
}

func validateRepeatedSchedule(s *RepeatedSchedule) error {
	var c v
	c.self(KindRepeatedSchedule, &s.Meta)
	c.str("name", s.Name, 50, reName)
	specified(&c, "scheduleStatus", s.ScheduleStatus)
	if s.DurationSeconds < 1 || s.DurationSeconds > MaxScheduleSeconds {
		c.fail("durationSeconds", "%d is out of range [1, %d]", s.DurationSeconds, MaxScheduleSeconds)
	}
	for _, f := range []struct {
		name, val string
		re        *regexp.Regexp
	}{
		{"cronMinutes", s.CronMinutes, reCronMinutes},
		{"cronHours", s.CronHours, reCronHours},
		{"cronDayMonth", s.CronDayMonth, reCronDom},
		{"cronMonth", s.CronMonth, reCronMonth},
		{"cronDayWeek", s.CronDayWeek, reCronDow},
	} {
		c.required(f.name, f.val)
		c.str(f.name, f.val, 200, f.re)
	}
	c.scheduleTargets(s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
	return c.err
}

// telemetryType checks the variant of a telemetry resource.
func (c *v) telemetryType(t TelemetryResourceKind) {
	if t != TelemetryLogs && t != TelemetryMetrics {
		c.fail("type", "%q is not %s or %s", string(t), TelemetryLogs, TelemetryMetrics)
	}
}

// specified requires an enum value other than its zero ("…_UNSPECIFIED").
func specified[T interface {
	~string
	Enum
}](c *v, field string, val T) {
	c.add(checkEnum(field, val))
	if val == "" || string(val) == val.Values()[0] {
		c.fail(field, "is required (one of %v)", val.Values()[1:])
	}
}

func validateTelemetryGroup(g *TelemetryGroup) error {
	var c v
	c.self(KindTelemetryGroup, &g.Meta)
	c.telemetryType(g.Type)
	c.required("name", g.Name)
	c.str("name", g.Name, 50, reName)
	specified(&c, "collectorKind", g.CollectorKind)
	switch n := len(g.Groups); {
	case n == 0:
		c.fail("groups", "is required (at least one log source or metric)")
	case n > MaxTelemetryGroupItems:
		c.fail("groups", "has %d items, at most %d allowed", n, MaxTelemetryGroupItems)
	}
	seen := map[string]bool{}
	for i, it := range g.Groups {
		f := fmt.Sprintf("groups[%d]", i)
		c.required(f, it)
		c.str(f, it, 1000, reTelGroup)
		if seen[it] {
			c.fail(f, "%q appears more than once", it)
		}
		seen[it] = true
	}
	return c.err
}

func validateTelemetryProfile(p *TelemetryProfile) error {
	var c v
	c.self(KindTelemetryProfile, &p.Meta)
	c.telemetryType(p.Type)
	n := 0
	for _, t := range []string{p.TargetInstance, p.TargetSite, p.TargetRegion} {
		if t != "" {
			n++
		}
	}
	if n != 1 {
		c.fail("targetInstance", "exactly one of targetInstance, targetSite, targetRegion is required, got %d", n)
	}
	c.id(KindInstance, "targetInstance", p.TargetInstance)
	c.id(KindSite, "targetSite", p.TargetSite)
	c.id(KindRegion, "targetRegion", p.TargetRegion)
	switch p.Type {
	case TelemetryLogs:
		specified(&c, "logLevel", p.LogLevel)
		c.required("logsGroupId", p.LogsGroupID)
		c.id(KindTelemetryGroup, "logsGroupId", p.LogsGroupID)
		if p.MetricsInterval != 0 || p.MetricsGroupID != "" {
			c.fail("metricsInterval", "a logs profile has no metricsInterval or metricsGroupId")
		}
	case TelemetryMetrics:
		if p.MetricsInterval < MinMetricsInterval || p.MetricsInterval > MaxMetricsInterval {
			c.fail("metricsInterval", "%d is out of range [%d, %d] (seconds)", p.MetricsInterval, MinMetricsInterval, MaxMetricsInterval)
		}
		c.required("metricsGroupId", p.MetricsGroupID)
		c.id(KindTelemetryGroup, "metricsGroupId", p.MetricsGroupID)
		if p.LogLevel != "" || p.LogsGroupID != "" {
			c.fail("logLevel", "a metrics profile has no logLevel or logsGroupId")
		}
	}
	return c.err
}

// ValidUUID reports whether s is a UUID in the 8-4-4-4-12 hex form.
func ValidUUID(s string) bool { return reUUID.MatchString(s) }

// ValidSerial reports whether s is an acceptable SMBIOS serial number (5 to
// 20 letters or digits, or empty).
func ValidSerial(s string) bool { return reSerial.MatchString(s) }

// ValidName reports whether s matches the pattern of resource names (≤ 50).
func ValidName(s string) bool { return utf8.RuneCountInString(s) <= 50 && reName.MatchString(s) }
