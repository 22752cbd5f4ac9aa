package eim

// OS is an operating-system profile: what the provisioning installs.
type OS struct {
	Meta
	AliasID string `json:"osResourceID" db:"-" eim:"alias"`

	Name                 string          `json:"name" eim:"w"`
	Architecture         string          `json:"architecture" eim:"w"`
	ImageURL             string          `json:"imageUrl" eim:"w"`
	ImageID              string          `json:"imageId" eim:"w"`
	Description          string          `json:"description" eim:"w"`
	Sha256               string          `json:"sha256" eim:"w"`
	ProfileName          string          `json:"profileName" eim:"w"`
	ProfileVersion       string          `json:"profileVersion"`
	InstalledPackages    string          `json:"installedPackages"`
	InstalledPackagesURL string          `json:"installedPackagesUrl" eim:"w"`
	SecurityFeature      SecurityFeature `json:"securityFeature" eim:"w"`
	OsType               OsType          `json:"osType" eim:"w"`
	OsProvider           OsProviderKind  `json:"osProvider" eim:"w"`
	PlatformBundle       string          `json:"platformBundle"`
	Metadata             string          `json:"metadata" eim:"w"`
	TLSCaCert            string          `json:"tlsCaCert" eim:"w"`
	ExistingCvesURL      string          `json:"existingCvesUrl" eim:"w"`
	ExistingCves         string          `json:"existingCves"`
	FixedCvesURL         string          `json:"fixedCvesUrl" eim:"w"`
	FixedCves            string          `json:"fixedCves"`
	RepoURL              string          `json:"repoUrl" eim:"w"`
}

func (*OS) ResourceKind() Kind { return KindOS }

// Provider is an infrastructure provider: where hosts come from and, with
// its config, project-wide defaults such as the OS for zero-touch.
type Provider struct {
	Meta
	AliasID string `json:"providerID" db:"-" eim:"alias"`

	ProviderKind   ProviderKind   `json:"providerKind" eim:"w"`
	ProviderVendor ProviderVendor `json:"providerVendor" eim:"w"`
	Name           string         `json:"name" eim:"w"`
	APIEndpoint    string         `json:"apiEndpoint" eim:"w"`
	APICredentials []string       `json:"apiCredentials" eim:"w"`
	Config         string         `json:"config" eim:"w"`
}

func (*Provider) ResourceKind() Kind { return KindProvider }

// LocalAccount is a user account with an SSH key, created on installed OSes.
type LocalAccount struct {
	Meta
	AliasID string `json:"localAccountID" db:"-" eim:"alias"`

	Username string `json:"username" eim:"w"`
	SSHKey   string `json:"sshKey" eim:"w"`
}

func (*LocalAccount) ResourceKind() Kind { return KindLocalAccount }

// CustomConfig is a cloud-init fragment applied to instances that name it.
type CustomConfig struct {
	Meta

	Name        string `json:"name" eim:"w"`
	Description string `json:"description" eim:"w"`
	Config      string `json:"config" eim:"w"`
}

func (*CustomConfig) ResourceKind() Kind { return KindCustomConfig }
