package eim

import "slices"

// Enum is implemented by every enumerated field type. Values lists the names
// the API accepts, the zero value ("…_UNSPECIFIED") first.
type Enum interface {
	Values() []string
}

// validEnum reports whether v is empty or one of the enum's values.
func validEnum[T ~string](v T, values []string) bool {
	return v == "" || slices.Contains(values, string(v))
}

func checkEnum[T interface {
	~string
	Enum
}](field string, v T) error {
	if !validEnum(v, v.Values()) {
		return Errorf(EINVALID, "%s: %q is not one of %v", field, string(v), v.Values())
	}
	return nil
}

type (
	HostState               string
	InstanceState           string
	InstanceKind            string
	PowerState              string
	PowerCommandPolicy      string
	StatusIndication        string
	BaremetalControllerKind string
	AmtSku                  string
	AmtState                string
	AmtControlMode          string
	KvmState                string
	KvmStatus               string
	SolState                string
	SolStatus               string
	SecurityFeature         string
	OsType                  string
	OsProviderKind          string
	ProviderKind            string
	ProviderVendor          string
	ScheduleStatus          string
	TelemetryResourceKind   string
	TelemetryCollectorKind  string
	SeverityLevel           string
	// SecureBootState is our extension (docs/security.md): the firmware's
	// Secure Boot state as a node's micro-OS read it.
	SecureBootState string
)

const (
	HostStateUnspecified HostState = "HOST_STATE_UNSPECIFIED"
	HostStateDeleted     HostState = "HOST_STATE_DELETED"
	HostStateOnboarded   HostState = "HOST_STATE_ONBOARDED"
	HostStateUntrusted   HostState = "HOST_STATE_UNTRUSTED"
	HostStateRegistered  HostState = "HOST_STATE_REGISTERED"

	InstanceStateUnspecified InstanceState = "INSTANCE_STATE_UNSPECIFIED"
	InstanceStateRunning     InstanceState = "INSTANCE_STATE_RUNNING"
	InstanceStateDeleted     InstanceState = "INSTANCE_STATE_DELETED"
	InstanceStateUntrusted   InstanceState = "INSTANCE_STATE_UNTRUSTED"

	InstanceKindUnspecified InstanceKind = "INSTANCE_KIND_UNSPECIFIED"
	InstanceKindMetal       InstanceKind = "INSTANCE_KIND_METAL"

	PowerStateUnspecified PowerState = "POWER_STATE_UNSPECIFIED"
	PowerStateOn          PowerState = "POWER_STATE_ON"
	PowerStateOff         PowerState = "POWER_STATE_OFF"
	PowerStateReset       PowerState = "POWER_STATE_RESET"
	PowerStatePowerCycle  PowerState = "POWER_STATE_POWER_CYCLE"
	PowerStateSleep       PowerState = "POWER_STATE_SLEEP"
	PowerStateHibernate   PowerState = "POWER_STATE_HIBERNATE"
	PowerStateResetRepeat PowerState = "POWER_STATE_RESET_REPEAT"

	BaremetalControllerKindUnspecified BaremetalControllerKind = "BAREMETAL_CONTROLLER_KIND_UNSPECIFIED"
	BaremetalControllerKindNone        BaremetalControllerKind = "BAREMETAL_CONTROLLER_KIND_NONE"
	BaremetalControllerKindIPMI        BaremetalControllerKind = "BAREMETAL_CONTROLLER_KIND_IPMI"
	BaremetalControllerKindVPRO        BaremetalControllerKind = "BAREMETAL_CONTROLLER_KIND_VPRO"
	// BaremetalControllerKindRedfish is EIM's extension of the original's
	// values (docs/compatibility.md): a host whose BMC speaks Redfish.
	BaremetalControllerKindRedfish BaremetalControllerKind = "BAREMETAL_CONTROLLER_KIND_REDFISH"

	PowerCommandPolicyUnspecified PowerCommandPolicy = "POWER_COMMAND_POLICY_UNSPECIFIED"
	PowerCommandPolicyImmediate   PowerCommandPolicy = "POWER_COMMAND_POLICY_IMMEDIATE"
	PowerCommandPolicyOrdered     PowerCommandPolicy = "POWER_COMMAND_POLICY_ORDERED"

	StatusUnspecified StatusIndication = "STATUS_INDICATION_UNSPECIFIED"
	StatusError       StatusIndication = "STATUS_INDICATION_ERROR"
	StatusInProgress  StatusIndication = "STATUS_INDICATION_IN_PROGRESS"
	StatusIdle        StatusIndication = "STATUS_INDICATION_IDLE"

	AmtStateUnspecified AmtState = "AMT_STATE_UNSPECIFIED"
	AmtStateProvisioned AmtState = "AMT_STATE_PROVISIONED"

	// The Secure Boot states, as the southbound protocol names them
	// (eim.provisioning.v1.SecureBootState).
	SecureBootStateUnspecified SecureBootState = "SECURE_BOOT_STATE_UNSPECIFIED" // not reported (yet, or by an older agent)
	SecureBootStateNotUEFI     SecureBootState = "SECURE_BOOT_STATE_NOT_UEFI"    // legacy BIOS boot: no EFI variables
	SecureBootStateDisabled    SecureBootState = "SECURE_BOOT_STATE_DISABLED"    // UEFI, Secure Boot off
	SecureBootStateSetupMode   SecureBootState = "SECURE_BOOT_STATE_SETUP_MODE"  // UEFI without a platform key: nothing enforced
	SecureBootStateEnabled     SecureBootState = "SECURE_BOOT_STATE_ENABLED"     // UEFI, Secure Boot enforced
)

func (HostState) Values() []string {
	return []string{"HOST_STATE_UNSPECIFIED", "HOST_STATE_DELETED", "HOST_STATE_ONBOARDED", "HOST_STATE_UNTRUSTED", "HOST_STATE_REGISTERED"}
}
func (InstanceState) Values() []string {
	return []string{"INSTANCE_STATE_UNSPECIFIED", "INSTANCE_STATE_RUNNING", "INSTANCE_STATE_DELETED", "INSTANCE_STATE_UNTRUSTED"}
}
func (InstanceKind) Values() []string {
	return []string{"INSTANCE_KIND_UNSPECIFIED", "INSTANCE_KIND_METAL"}
}
func (PowerState) Values() []string {
	return []string{"POWER_STATE_UNSPECIFIED", "POWER_STATE_ON", "POWER_STATE_OFF", "POWER_STATE_SLEEP", "POWER_STATE_HIBERNATE", "POWER_STATE_RESET", "POWER_STATE_POWER_CYCLE", "POWER_STATE_RESET_REPEAT"}
}
func (PowerCommandPolicy) Values() []string {
	return []string{"POWER_COMMAND_POLICY_UNSPECIFIED", "POWER_COMMAND_POLICY_IMMEDIATE", "POWER_COMMAND_POLICY_ORDERED"}
}
func (StatusIndication) Values() []string {
	return []string{"STATUS_INDICATION_UNSPECIFIED", "STATUS_INDICATION_ERROR", "STATUS_INDICATION_IN_PROGRESS", "STATUS_INDICATION_IDLE"}
}
func (BaremetalControllerKind) Values() []string {
	return []string{"BAREMETAL_CONTROLLER_KIND_UNSPECIFIED", "BAREMETAL_CONTROLLER_KIND_NONE", "BAREMETAL_CONTROLLER_KIND_IPMI", "BAREMETAL_CONTROLLER_KIND_VPRO", "BAREMETAL_CONTROLLER_KIND_PDU", "BAREMETAL_CONTROLLER_KIND_REDFISH"}
}
func (AmtSku) Values() []string { return []string{"AMT_SKU_UNSPECIFIED", "AMT_SKU_AMT", "AMT_SKU_ISM"} }
func (AmtState) Values() []string {
	return []string{"AMT_STATE_UNSPECIFIED", "AMT_STATE_PROVISIONED", "AMT_STATE_UNPROVISIONED", "AMT_STATE_DISCONNECTED"}
}
func (AmtControlMode) Values() []string {
	return []string{"AMT_CONTROL_MODE_UNSPECIFIED", "AMT_CONTROL_MODE_ACM", "AMT_CONTROL_MODE_CCM"}
}
func (KvmState) Values() []string {
	return []string{"KVM_STATE_UNSPECIFIED", "KVM_STATE_START", "KVM_STATE_STOP", "KVM_STATE_AWAITING_CONSENT", "KVM_STATE_ERROR", "KVM_CONSENT_RECEIVED", "KVM_REDIRECTION_RECEIVED"}
}
func (KvmStatus) Values() []string {
	return []string{"KVM_STATUS_UNSPECIFIED", "KVM_STATUS_ACTIVATED", "KVM_STATUS_DEACTIVATED"}
}
func (SolState) Values() []string {
	return []string{"SOL_STATE_UNSPECIFIED", "SOL_STATE_START", "SOL_STATE_STOP", "SOL_STATE_AWAITING_CONSENT", "SOL_STATE_ERROR", "SOL_STATE_CONSENT_RECEIVED", "SOL_STATE_REDIRECTION_RECEIVED"}
}
func (SolStatus) Values() []string {
	return []string{"SOL_STATUS_UNSPECIFIED", "SOL_STATUS_ACTIVATED", "SOL_STATUS_DEACTIVATED"}
}
func (SecurityFeature) Values() []string {
	return []string{"SECURITY_FEATURE_UNSPECIFIED", "SECURITY_FEATURE_NONE", "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"}
}
func (OsType) Values() []string {
	return []string{"OS_TYPE_UNSPECIFIED", "OS_TYPE_MUTABLE", "OS_TYPE_IMMUTABLE"}
}
func (OsProviderKind) Values() []string {
	return []string{"OS_PROVIDER_KIND_UNSPECIFIED", "OS_PROVIDER_KIND_INFRA", "OS_PROVIDER_KIND_LENOVO"}
}
func (ProviderKind) Values() []string {
	return []string{"PROVIDER_KIND_UNSPECIFIED", "PROVIDER_KIND_BAREMETAL"}
}
func (ProviderVendor) Values() []string {
	return []string{"PROVIDER_VENDOR_UNSPECIFIED", "PROVIDER_VENDOR_LENOVO_LXCA", "PROVIDER_VENDOR_LENOVO_LOCA"}
}
func (ScheduleStatus) Values() []string {
	return []string{"SCHEDULE_STATUS_UNSPECIFIED", "SCHEDULE_STATUS_MAINTENANCE", "SCHEDULE_STATUS_OS_UPDATE"}
}
func (TelemetryResourceKind) Values() []string {
	return []string{"TELEMETRY_RESOURCE_KIND_UNSPECIFIED", "TELEMETRY_RESOURCE_KIND_METRICS", "TELEMETRY_RESOURCE_KIND_LOGS"}
}
func (TelemetryCollectorKind) Values() []string {
	return []string{"TELEMETRY_COLLECTOR_KIND_UNSPECIFIED", "TELEMETRY_COLLECTOR_KIND_HOST", "TELEMETRY_COLLECTOR_KIND_CLUSTER"}
}
func (SeverityLevel) Values() []string {
	return []string{"SEVERITY_LEVEL_UNSPECIFIED", "SEVERITY_LEVEL_CRITICAL", "SEVERITY_LEVEL_ERROR", "SEVERITY_LEVEL_WARN", "SEVERITY_LEVEL_INFO", "SEVERITY_LEVEL_DEBUG"}
}
func (SecureBootState) Values() []string {
	return []string{"SECURE_BOOT_STATE_UNSPECIFIED", "SECURE_BOOT_STATE_NOT_UEFI", "SECURE_BOOT_STATE_DISABLED", "SECURE_BOOT_STATE_SETUP_MODE", "SECURE_BOOT_STATE_ENABLED"}
}
