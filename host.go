package eim

// Host is a physical edge machine. The API writes its desired fields (those
// tagged eim:"w"); managers write its current state and status fields.
type Host struct {
	Meta

	Name         string    `json:"name" eim:"w"`
	DesiredState HostState `json:"desiredState"`
	CurrentState HostState `json:"currentState"`
	SiteID       string    `json:"siteId" eim:"w,edge=site:site"`
	ProviderID   string    `json:"providerId" eim:"edge=provider:provider"`
	Note         string    `json:"note"`
	SerialNumber string    `json:"serialNumber"`
	UUID         string    `json:"uuid" eim:"w,fold"`

	MemoryBytes     uint64                  `json:"memoryBytes,string"`
	CPUModel        string                  `json:"cpuModel"`
	CPUSockets      uint32                  `json:"cpuSockets"`
	CPUCores        uint32                  `json:"cpuCores"`
	CPUCapabilities string                  `json:"cpuCapabilities"`
	CPUArchitecture string                  `json:"cpuArchitecture"`
	CPUThreads      uint32                  `json:"cpuThreads"`
	CPUTopology     string                  `json:"cpuTopology"`
	BmcKind         BaremetalControllerKind `json:"bmcKind"`
	BmcIP           string                  `json:"bmcIp"`
	Hostname        string                  `json:"hostname"`
	ProductName     string                  `json:"productName"`
	BiosVersion     string                  `json:"biosVersion"`
	BiosReleaseDate string                  `json:"biosReleaseDate"`
	BiosVendor      string                  `json:"biosVendor"`

	DesiredPowerState    PowerState         `json:"desiredPowerState" eim:"w"`
	CurrentPowerState    PowerState         `json:"currentPowerState"`
	PowerStatus          string             `json:"powerStatus"`
	PowerStatusIndicator StatusIndication   `json:"powerStatusIndicator"`
	PowerStatusTimestamp uint64             `json:"powerStatusTimestamp"`
	PowerCommandPolicy   PowerCommandPolicy `json:"powerCommandPolicy" eim:"w"`
	PowerOnTime          uint64             `json:"powerOnTime"`

	HostStatus                  string           `json:"hostStatus"`
	HostStatusIndicator         StatusIndication `json:"hostStatusIndicator"`
	HostStatusTimestamp         uint64           `json:"hostStatusTimestamp"`
	OnboardingStatus            string           `json:"onboardingStatus"`
	OnboardingStatusIndicator   StatusIndication `json:"onboardingStatusIndicator"`
	OnboardingStatusTimestamp   uint64           `json:"onboardingStatusTimestamp"`
	RegistrationStatus          string           `json:"registrationStatus"`
	RegistrationStatusIndicator StatusIndication `json:"registrationStatusIndicator"`
	RegistrationStatusTimestamp uint64           `json:"registrationStatusTimestamp"`

	AmtSku             AmtSku           `json:"amtSku"`
	DesiredAmtState    AmtState         `json:"desiredAmtState" eim:"w"`
	CurrentAmtState    AmtState         `json:"currentAmtState"`
	AmtStatus          string           `json:"amtStatus"`
	AmtStatusIndicator StatusIndication `json:"amtStatusIndicator"`
	AmtStatusTimestamp uint64           `json:"amtStatusTimestamp"`
	UserLvmSize        uint32           `json:"userLvmSize"`
	AmtControlMode     AmtControlMode   `json:"amtControlMode" eim:"w"`
	AmtDNSSuffix       string           `json:"amtDnsSuffix" eim:"w"`
	KvmStatus          KvmStatus        `json:"kvmStatus"`
	DesiredKvmState    KvmState         `json:"desiredKvmState" eim:"w"`
	CurrentKvmState    KvmState         `json:"currentKvmState"`
	KvmSessionStatus   string           `json:"kvmSessionStatus"`
	SolStatus          SolStatus        `json:"solStatus"`
	DesiredSolState    SolState         `json:"desiredSolState" eim:"w"`
	CurrentSolState    SolState         `json:"currentSolState"`
	SolSessionStatus   string           `json:"solSessionStatus"`

	// SecureBootState is the firmware's Secure Boot state as the node's
	// micro-OS last read it (at Discover and when it asked for its
	// workflow), and SecureBootStateTimestamp when (unix seconds; 0
	// never). Our extension: the original's host has no such field
	// (docs/security.md). Written by the onboarding module (at Discover,
	// eim.DeviceClaims) and the provisioning module
	// (inventory.RecordSecureBoot) only.
	SecureBootState          SecureBootState `json:"secureBootState"`
	SecureBootStateTimestamp uint64          `json:"secureBootStateTimestamp"`

	Metadata Metadata `json:"metadata" eim:"w"`

	// Hardware children, as the node last reported them (see hardware.go).
	HostStorages List[HostStorage] `json:"hostStorages"`
	HostNics     List[HostNic]     `json:"hostNics"`
	HostUsbs     List[HostUsb]     `json:"hostUsbs"`
	HostGpus     List[HostGpu]     `json:"hostGpus"`
	// HardwareDigest names the hardware report the fields above come from
	// (the host module compares it to skip unchanged reports); never on
	// the wire.
	HardwareDigest string `json:"-" db:"hardware_digest"`
	// BootID is the boot the node last reported in its heartbeats (its
	// /proc/sys/kernel/random/boot_id; "" none): a new one is a reboot.
	// Never on the wire.
	BootID string `json:"-" db:"boot_id"`

	// Node credentials (southbound): the lower-case hex SHA-256 of the
	// node's client secret ("" = none) and a generation bumped on every
	// issue and revoke, which node tokens carry. Stored, never on the wire.
	NodeSecretHash string `json:"-" db:"node_secret_hash"`
	NodeCredGen    int64  `json:"-" db:"node_cred_gen"`

	// Filled on read by the inventory, never stored.
	InheritedMetadata Metadata  `json:"inheritedMetadata" db:"-"`
	Site              *Site     `json:"site" db:"-"`
	Provider          *Provider `json:"provider" db:"-"`
	Instance          *Instance `json:"instance" db:"-"`
}

func (*Host) ResourceKind() Kind { return KindHost }

// Instance is the OS installed (or to be installed) on a host.
type Instance struct {
	Meta
	AliasID string `json:"instanceID" db:"-" eim:"alias"`

	Kind            InstanceKind    `json:"kind" eim:"w"`
	Name            string          `json:"name" eim:"w"`
	DesiredState    InstanceState   `json:"desiredState"`
	CurrentState    InstanceState   `json:"currentState"`
	HostID          string          `json:"hostID" eim:"w,edge=host:host"`
	OSID            string          `json:"osID" eim:"w,edge=os:os"`
	SecurityFeature SecurityFeature `json:"securityFeature" eim:"w"`

	InstanceStatus                    string           `json:"instanceStatus"`
	InstanceStatusIndicator           StatusIndication `json:"instanceStatusIndicator"`
	InstanceStatusTimestamp           uint64           `json:"instanceStatusTimestamp"`
	ProvisioningStatus                string           `json:"provisioningStatus"`
	ProvisioningStatusIndicator       StatusIndication `json:"provisioningStatusIndicator"`
	ProvisioningStatusTimestamp       uint64           `json:"provisioningStatusTimestamp"`
	UpdateStatus                      string           `json:"updateStatus"`
	UpdateStatusIndicator             StatusIndication `json:"updateStatusIndicator"`
	UpdateStatusTimestamp             uint64           `json:"updateStatusTimestamp"`
	TrustedAttestationStatus          string           `json:"trustedAttestationStatus"`
	TrustedAttestationStatusIndicator StatusIndication `json:"trustedAttestationStatusIndicator"`
	TrustedAttestationStatusTimestamp uint64           `json:"trustedAttestationStatusTimestamp"`
	InstanceStatusDetail              string           `json:"instanceStatusDetail"`
	ExistingCves                      string           `json:"existingCves"`
	RuntimePackages                   string           `json:"runtimePackages"`
	OsUpdateAvailable                 string           `json:"osUpdateAvailable"`

	LocalAccountID   string   `json:"localAccountID" eim:"w,edge=localaccount:localaccount"`
	OSUpdatePolicyID string   `json:"osUpdatePolicyID" eim:"w,edge=updatePolicy:osupdatepolicy"`
	CustomConfigIDs  []string `json:"customConfigID" eim:"w"`

	// Filled on read by the inventory, never stored.
	Host          *Host           `json:"host" db:"-"`
	OS            *OS             `json:"os" db:"-"`
	LocalAccount  *LocalAccount   `json:"localaccount" db:"-"`
	CustomConfigs []*CustomConfig `json:"customConfig" db:"-"`
	UpdatePolicy  *OSUpdatePolicy `json:"updatePolicy" db:"-"`
	// The instance's workload memberships (at most one), each with its
	// workload.
	WorkloadMembers []*WorkloadMember `json:"workloadMembers" db:"-"`
}

func (*Instance) ResourceKind() Kind { return KindInstance }
