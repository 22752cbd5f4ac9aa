package spec

import "github.com/eimhq/eim"

// rule is what the Go types cannot say about a field: the limits the API
// enforces (facts shared with the original API, so that clients validating
// against either document agree) and a sentence for readers.
type rule struct {
	desc      string
	maxLength int
	minLength int
	pattern   string
	format    string
	min, max  *int64
	maxItems  int
	items     *rule // for arrays of strings
	required  bool  // must be sent on create
}

func bound(v int64) *int64 { return &v }

// Patterns used by several fields.
const (
	namePat    = `^$|^[a-zA-Z-_0-9./: ]+$`
	uuidPat    = `^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	textPat    = `^$|^[a-zA-Z-_0-9./:;=@?!#,<>*()" ]+$`
	urlPat     = `^$|^[a-zA-Z-_0-9./:;=@?!#,<>*()"\ ]+$`
	credPat    = `^$|^[a-zA-Z-_0-9.\/:;=?@!#,<>*(){}"\\ ]+$`
	accountPat = `^[a-z][a-z0-9-]{0,31}$`
	// telemetryItemPat is the pattern of a telemetry group's inputs.
	telemetryItemPat = `^[a-zA-Z-_0-9.:;=@?!#*()"\ ]+$`
	statusLimit      = 1024
	bigText          = 500000
)

var resourceName = rule{desc: "A name for people; need not be unique.", maxLength: 50, pattern: namePat}

// rules holds the per-kind facts, by JSON field name. Fields without an
// entry get a generic description derived from their name and Go type.
var rules = map[eim.Kind]map[string]rule{
	eim.KindRegion: {
		"name":     resourceName,
		"parentId": {desc: "ID of the parent region; empty for a root region. Regions nest at most 5 deep."},
		"metadata": {desc: "Labels of this region. Sites and hosts below inherit them."},
		"totalSites": {desc: "Number of sites in this region and in the regions below it, as the original counted them; " +
			"counted only when the list was asked for with showTotalSites=true (0 otherwise).", min: bound(0)},
		"parentRegion": {desc: "The parent region, expanded on read (with its own parent)."},
	},
	eim.KindSite: {
		"name":     resourceName,
		"regionId": {desc: "ID of the region the site is in; empty for a site outside any region."},
		"siteLat":  {desc: "Latitude in degrees multiplied by 10^7.", format: "int32", min: bound(-900000000), max: bound(900000000)},
		"siteLng":  {desc: "Longitude in degrees multiplied by 10^7.", format: "int32", min: bound(-1800000000), max: bound(1800000000)},
		"metadata": {desc: "Labels of this site; keys here override the region's."},
		"region":   {desc: "The site's region, expanded on read."},
		"powerPolicy": {desc: "Our extension: the power policy of the site's hosts whose BMC sets none (ALWAYS_ON, REPORT; empty: the project's).",
			pattern: "^$|^(ALWAYS_ON|REPORT)$"},
	},
	eim.KindHost: {
		"name":               {desc: "A name for people; need not be unique.", maxLength: 50, pattern: namePat, required: true},
		"siteId":             {desc: "ID of the site the host is at; empty while unallocated."},
		"providerId":         {desc: "ID of the provider the host came from, if any. Set by the system."},
		"note":               {desc: "Why the host was invalidated (the note given to invalidate).", maxLength: 512, pattern: textPat},
		"serialNumber":       {desc: "Serial number reported at registration or by the node; cannot be changed through the API."},
		"uuid":               {desc: "SMBIOS UUID of the machine; unique within the project (another project registering it too never takes the machine from the earlier registration). May be set on create only.", maxLength: 36, pattern: uuidPat},
		"memoryBytes":        {desc: "Installed memory in bytes, as a decimal string (64-bit)."},
		"amtDnsSuffix":       {desc: "DNS suffix used when provisioning Intel AMT.", maxLength: statusLimit},
		"userLvmSize":        {desc: "Size in GB of the user LVM volume created at installation."},
		"metadata":           {desc: "Labels of this host; keys here override the site's and region's."},
		"powerOnTime":        {desc: "Unix time (seconds) the host last powered on."},
		"powerCommandPolicy": {desc: "How power commands are applied."},
		"amtSku":             {desc: "Intel AMT edition, as reported by the node."},
		"amtControlMode":     {desc: "Intel AMT control mode to provision."},
		"site":               {desc: "The host's site, with its region, expanded on read."},
		"provider":           {desc: "The host's provider, expanded on read."},
		"instance":           {desc: "The instance installed on this host, with its OS, expanded on read."},
		"hostStorages":       {desc: "Storage devices of the host, as its node last reported them."},
		"hostNics":           {desc: "Network interfaces of the host, as its node last reported them."},
		"hostUsbs":           {desc: "USB devices of the host, as its node last reported them."},
		"hostGpus":           {desc: "GPUs of the host, as its node last reported them."},
		"secureBootState": {desc: "Our extension: the firmware's Secure Boot state as the host's node last read it in the micro-OS " +
			"(EFI variables SecureBoot and SetupMode), reported at device discovery and with its request for the workflow: " +
			"NOT_UEFI (legacy BIOS), DISABLED, SETUP_MODE (no platform key: nothing enforced), ENABLED (enforced); " +
			"UNSPECIFIED until a node reports it. Read-only."},
		"secureBootStateTimestamp": {desc: "Our extension: when the node last reported secureBootState, unix seconds (0: never). Read-only."},
	},
	eim.KindInstance: {
		"name":                 resourceName,
		"kind":                 {desc: "What the instance runs on; only bare metal."},
		"securityFeature":      {desc: "Security features to enable at installation, e.g. secure boot with full-disk encryption."},
		"hostID":               {desc: "ID of the host the OS is installed on.", required: true},
		"desiredState":         {desc: "The lifecycle state the user wants. Set by create, invalidate and delete, not by writing it."},
		"osID":                 {desc: "ID of the OS profile to install.", required: true},
		"localAccountID":       {desc: "ID of the local account created on the installed OS; frozen once provisioning starts."},
		"osUpdatePolicyID":     {desc: "ID of the OS update policy that applies to this instance; \"\" for none."},
		"updatePolicy":         {desc: "The instance's OS update policy, with its target OS, expanded on read."},
		"workloadMembers":      {desc: "The instance's workload memberships (one at most), each with its workload, expanded on read."},
		"customConfigID":       {desc: "IDs of custom cloud-init configs applied at installation; frozen once provisioning starts.", items: &rule{maxLength: 21, pattern: `^customconfig-[0-9a-f]{8}$`}},
		"instanceStatusDetail": {desc: "Detail of the instance status.", maxLength: statusLimit},
		"existingCves":         {desc: "CVEs present in the installed OS (JSON text).", maxLength: bigText},
		"runtimePackages":      {desc: "Packages installed on the running OS (JSON text).", maxLength: bigText},
		"osUpdateAvailable":    {desc: "Updates available for the installed OS.", maxLength: bigText},
		"host":                 {desc: "The host, expanded on read."},
		"os":                   {desc: "The OS profile, expanded on read."},
		"localaccount":         {desc: "The local account, expanded on read."},
		"customConfig":         {desc: "The custom configs, expanded on read."},
	},
	eim.KindOS: {
		"name":                 {desc: "Name of the OS profile; unique within the project.", maxLength: 128, pattern: `^$|^[a-zA-Z-_0-9./: ()]+$`},
		"architecture":         {desc: "CPU architecture the image is built for.", maxLength: 20, pattern: textPat},
		"imageUrl":             {desc: "Where the image is downloaded from.", maxLength: 500, pattern: urlPat},
		"imageId":              {desc: "Version or identifier of the image.", maxLength: 500, pattern: urlPat},
		"description":          {desc: "Free text.", maxLength: 1000, pattern: "^$|^[a-zA-Z-_0-9.:;=@?!#,<>*(){}&%$`^\\+\\- ]+$"},
		"sha256":               {desc: "SHA-256 of the image, lowercase hex.", minLength: 64, maxLength: 64, pattern: `^[a-f0-9]+$`, required: true},
		"profileName":          {desc: "Name of the OS profile in the catalog it came from.", maxLength: 128, pattern: urlPat},
		"profileVersion":       {desc: "Version of the OS profile in the catalog it came from."},
		"installedPackages":    {desc: "Packages in the image (JSON text).", maxLength: bigText},
		"installedPackagesUrl": {desc: "Where the list of installed packages is published.", maxLength: 200, format: "uri-reference"},
		"metadata":             {desc: "Free-form metadata of the profile, as JSON text (not a label list).", maxLength: 500, pattern: `^$|^[a-z0-9,.\-_:/"\\ \\n{}\[\]]+$`},
		"tlsCaCert":            {desc: "Base64 CA certificate trusted when downloading the image.", maxLength: 10000, pattern: `^$|^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`},
		"existingCvesUrl":      {desc: "Where the CVEs present in the image are published.", maxLength: 500, format: "uri-reference"},
		"existingCves":         {desc: "CVEs present in the image (JSON text).", maxLength: bigText},
		"fixedCvesUrl":         {desc: "Where the CVEs fixed by the image are published.", maxLength: 500, format: "uri-reference"},
		"fixedCves":            {desc: "CVEs fixed by the image (JSON text).", maxLength: bigText},
		"repoUrl":              {desc: "Package repository of a mutable OS.", maxLength: 500, pattern: textPat},
		"platformBundle":       {desc: "Platform bundle of the profile (JSON text)."},
		"securityFeature":      {desc: "Security features the OS supports."},
		"osType":               {desc: "Whether the OS is updated by packages or by image."},
		"osProvider":           {desc: "Who supplies the profile."},
	},
	eim.KindProvider: {
		"providerKind":   {desc: "What kind of infrastructure the provider offers.", required: true},
		"providerVendor": {desc: "Who makes the provider's management system."},
		"name":           {desc: "Name of the provider; unique within the project.", maxLength: 40, pattern: namePat, required: true},
		"apiEndpoint":    {desc: "URL of the provider's management API.", maxLength: 500, pattern: `^$|^[a-zA-Z-_0-9./:;=?@!#,<>*() ]+$`, required: true},
		"apiCredentials": {desc: "Credentials for the provider's API.", maxItems: 100, items: &rule{maxLength: 500, pattern: credPat}},
		"config":         {desc: "Provider configuration as JSON text, e.g. the default OS for zero-touch provisioning.", maxLength: 2000, pattern: credPat},
	},
	eim.KindSingleSchedule: {
		"scheduleStatus": {desc: "What the window is for.", required: true},
		"name":           resourceName,
		"startSeconds":   {desc: "Start of the window, Unix time in seconds.", min: bound(1), max: bound(4294967295), required: true},
		"endSeconds":     {desc: "End of the window, Unix time in seconds; 0 for a window without end.", min: bound(0), max: bound(4294967295)},
		"targetHostId":   {desc: "ID of the host the window applies to. Exactly one target is set."},
		"targetSiteId":   {desc: "ID of the site whose hosts the window applies to."},
		"targetRegionId": {desc: "ID of the region whose hosts the window applies to."},
	},
	eim.KindRepeatedSchedule: {
		"scheduleStatus":  {desc: "What the window is for.", required: true},
		"name":            resourceName,
		"durationSeconds": {desc: "How long each window stays open.", format: "int32", min: bound(1), max: bound(86400), required: true},
		"cronMinutes":     {desc: "Minutes the window opens at (UTC): * or a comma list of 0-59.", pattern: `^([*]|([0-9]|([1-5][0-9]))((,([0-9]|([1-5][0-9])))*))$`, required: true},
		"cronHours":       {desc: "Hours: * or a comma list of 0-23.", pattern: `^([*]|([0-9]|1[0-9]|2[0-3])((,([0-9]|1[0-9]|2[0-3]))*))$`, required: true},
		"cronDayMonth":    {desc: "Days of the month: * or a comma list of 1-31.", pattern: `^([*]|([1-9]|([12][0-9])|3[01])((,([1-9]|([12][0-9])|3[01]))*))$`, required: true},
		"cronMonth":       {desc: "Months: * or a comma list of 1-12.", pattern: `^([*]|([1-9]|1[012])((,([1-9]|1[012]))*))$`, required: true},
		"cronDayWeek":     {desc: "Days of the week: * or a comma list of 0-6 (0 is Sunday).", pattern: `^([*]|([0-6])((,([0-6]))*))$`, required: true},
		"targetHostId":    {desc: "ID of the host the windows apply to. Exactly one target is set."},
		"targetSiteId":    {desc: "ID of the site whose hosts the windows apply to."},
		"targetRegionId":  {desc: "ID of the region whose hosts the windows apply to."},
	},
	eim.KindLocalAccount: {
		"username": {desc: "Login name on the installed OS; unique within the project.", maxLength: 32, pattern: accountPat, required: true},
		"sshKey":   {desc: "Public SSH key (ed25519 or ECDSA P-521) authorised for the account.", maxLength: 800, pattern: `^(ssh-ed25519|ecdsa-sha2-nistp521) ([A-Za-z0-9+/=]+) ?(.*)?$`, required: true},
	},
	eim.KindCustomConfig: {
		"name":        {desc: "Name of the config; unique within the project.", maxLength: 40, pattern: accountPat, required: true},
		"description": {desc: "Free text.", maxLength: 256, pattern: textPat},
		"config":      {desc: "The cloud-init fragment.", maxLength: 16384, required: true},
	},
	eim.KindTelemetryGroup: {
		"name":          {desc: "A name for people; need not be unique.", minLength: 1, maxLength: 50, pattern: namePat, required: true},
		"collectorKind": {desc: "Which collector gathers the group: HOST (the node's) or CLUSTER; UNSPECIFIED is refused.", required: true},
		"groups": {desc: "The collector's inputs: log sources or metric names. 1 to 100, unique, none empty.", maxItems: eim.MaxTelemetryGroupItems,
			items: &rule{maxLength: 1000, pattern: telemetryItemPat}, required: true},
	},
	eim.KindTelemetryProfile: {
		"targetInstance": {desc: "ID of the instance whose node the profile applies to. Exactly one of targetInstance, targetSite and targetRegion is set."},
		"targetSite":     {desc: "ID of the site whose hosts' nodes the profile applies to."},
		"targetRegion":   {desc: "ID of the region whose sites' (and subregions') nodes the profile applies to."},
		"logLevel":       {desc: "The log level to collect the group at; UNSPECIFIED is refused.", required: true},
		"logsGroupId":    {desc: "ID of the logs group the profile turns on.", required: true},
		"logsGroup":      {desc: "The logs group, expanded on read."},
		"metricsInterval": {desc: "How often, in seconds, to collect the group's metrics.", format: "int32",
			min: bound(eim.MinMetricsInterval), max: bound(eim.MaxMetricsInterval), required: true},
		"metricsGroupId": {desc: "ID of the metrics group the profile turns on.", required: true},
		"metricsGroup":   {desc: "The metrics group, expanded on read."},
	},
	eim.KindOSUpdatePolicy: {
		"name":        {desc: "A name for people; need not be unique.", maxLength: 50, pattern: namePat, required: true},
		"description": {desc: "Free text.", maxLength: 200, pattern: runTextPat},
		"updateSources": {desc: "Package sources to add, for a mutable OS: in DEB822 format for Debian-like OSes. Up to 100, none empty.",
			maxItems: eim.MaxUpdateSources, items: &rule{maxLength: 10000, pattern: updateSourcePat}},
		"updatePackages": {desc: "Packages to install or upgrade, for a mutable OS: one name per line, without versions.",
			maxLength: 500000, pattern: updatePkgPat},
		"updateKernelCommand": {desc: "Kernel command-line options to set, for a mutable OS.", maxLength: 500, pattern: textPat},
		"targetOsId": {desc: "ID of the OS profile an immutable OS is updated to (UPDATE_POLICY_TARGET); it must exist in the project " +
			"and not be a mutable OS. Exclusive with updateSources, updatePackages and updateKernelCommand."},
		"updatePolicy": {desc: "LATEST or TARGET; UNSPECIFIED is refused.", required: true},
		"targetOs":     {desc: "The target OS profile, expanded on read."},
	},
	eim.KindOSUpdateRun: {
		"name":            {desc: "Name of the run, set by the maintenance module.", maxLength: 40, pattern: runTextPat},
		"description":     {desc: "Free text set by the maintenance module.", maxLength: 200, pattern: runTextPat},
		"status":          {desc: "What happened, in short: Updating, Update completed, Update failed, No new updates available.", maxLength: statusLimit},
		"statusIndicator": {desc: "IN_PROGRESS while the update runs, IDLE when it succeeded (or found nothing to do), ERROR when it failed."},
		"statusDetails":   {desc: "What the node reported about the update (its log).", maxLength: eim.MaxRunStatusDetails},
		"statusTimestamp": {desc: "Unix time (seconds) status last changed."},
		"startTime":       {desc: "Unix time (seconds) the update started."},
		"endTime":         {desc: "Unix time (seconds) the update ended; 0 while it runs."},
		"appliedPolicy":   {desc: "The OS update policy the run applied, expanded on read; absent when it applied none."},
		"instance":        {desc: "The instance updated, expanded on read."},
	},
	eim.KindWorkload: {
		"kind":       {desc: "What the workload is; WORKLOAD_KIND_CLUSTER (UNSPECIFIED is refused).", required: true},
		"name":       resourceName,
		"externalId": {desc: "ID of what the workload is outside EIM (e.g. the cluster's name); unique in the project when set.", maxLength: 40, pattern: namePat},
		"status":     {desc: "Status text of the workload, for people.", maxLength: 500, pattern: runTextPat},
		"members":    {desc: "The workload's members, each with its instance, expanded on read."},
	},
	eim.KindWorkloadMember: {
		"kind":       {desc: "The instance's role in the workload; WORKLOAD_MEMBER_KIND_CLUSTER_NODE (UNSPECIFIED is refused).", required: true},
		"workloadId": {desc: "ID of the workload; set on create.", required: true},
		"instanceId": {desc: "ID of the instance; set on create. An instance is a member of one workload at most.", required: true},
		"workload":   {desc: "The workload, expanded on read (without its members)."},
		"instance":   {desc: "The instance, expanded on read."},
		"member":     {desc: "The instance again, under the original API's second name for it."},
	},
}

// OS update patterns of the original's schemas.
const (
	runTextPat      = `^$|^[a-zA-Z-_0-9./:;=?@!#,<>*() ]+$`
	updateSourcePat = `^$|^[a-zA-Z-_0-9./:;=@?!#,<>*+()\[\]" \n]+$`
	updatePkgPat    = `^$|^[A-Za-z0-9._/:;=@?!#,<>\-*+~()\[\]{} \n]+$`
)

// strictEdges are references that are always set, so their pattern does not
// admit the empty string.
var strictEdges = map[eim.Kind]map[string]bool{
	eim.KindInstance:         {"hostID": true, "osID": true},
	eim.KindTelemetryProfile: {"logsGroupId": true, "metricsGroupId": true},
	eim.KindWorkloadMember:   {"workloadId": true, "instanceId": true},
}
