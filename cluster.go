package eim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// Edge clusters (the clusters module, package clusters): Kubernetes
// clusters built from a project's hosts, from a cluster template. Neither
// templates nor clusters are Store resources (Kinds does not list them):
// they have a store of their own (ClusterStore), whose writes put events
// of KindCluster and KindClusterTemplate in the change feed.

// The kinds of the clusters module's events; cluster IDs are
// "cluster-" and 8 hex digits.
const (
	KindCluster         Kind = "cluster"
	KindClusterTemplate Kind = "clustertemplate"
)

// ClusterRole is what a node is in its cluster, as the original's API
// names it.
type ClusterRole string

const (
	ClusterRoleAll          ClusterRole = "all" // control plane and workloads
	ClusterRoleControlPlane ClusterRole = "controlplane"
	ClusterRoleWorker       ClusterRole = "worker"
)

// ControlPlane reports whether a node of role r runs the control plane.
func (r ClusterRole) ControlPlane() bool { return r == ClusterRoleAll || r == ClusterRoleControlPlane }

// Valid reports whether r is one of the roles.
func (r ClusterRole) Valid() bool {
	return r == ClusterRoleAll || r == ClusterRoleControlPlane || r == ClusterRoleWorker
}

// The cluster agent states a node reports (eim.cluster.v1), by their
// original names.
const (
	AgentInactive            = "INACTIVE"
	AgentRegistering         = "REGISTERING"
	AgentInstallInProgress   = "INSTALL_IN_PROGRESS"
	AgentActive              = "ACTIVE"
	AgentDeregistering       = "DEREGISTERING"
	AgentUninstallInProgress = "UNINSTALL_IN_PROGRESS"
	AgentError               = "ERROR"
)

// ClusterTemplate is a named, versioned recipe of a cluster, as the
// original's cluster manager has them. A template is never changed: a
// new version is a new template.
type ClusterTemplate struct {
	Project           string `json:"-"`
	Name              string `json:"name"`
	Version           string `json:"version"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Description       string `json:"description,omitempty"`
	// ControlPlaneProvider is "k3s" (the only distribution EIM installs)
	// or the original's "kubeadm" (imported and kept, refused when a
	// cluster would use it: Installable); InfraProvider is the original's
	// "intel" (EIM's hosts) or "docker".
	ControlPlaneProvider string `json:"controlplaneprovidertype"`
	InfraProvider        string `json:"infraprovidertype"`
	// Configuration is the original's clusterconfiguration: a
	// KThreesControlPlaneTemplate object, of which EIM applies
	// spec.template.spec.kthreesConfigSpec (K3s).
	Configuration json.RawMessage   `json:"clusterconfiguration,omitempty"`
	Network       ClusterNetwork    `json:"clusterNetwork"`
	Labels        map[string]string `json:"cluster-labels"`
	// Artifacts (EIM's) say where nodes download the distribution's
	// binary and air-gap images; none: from the server's artifact store.
	Artifacts []ClusterArtifact `json:"artifacts,omitempty"`

	Default   bool `json:"-"`
	CreatedAt Time `json:"-"`
}

// ClusterNetwork is a cluster's pod and service networks.
type ClusterNetwork struct {
	Pods     NetworkRanges `json:"pods"`
	Services NetworkRanges `json:"services"`
}

// NetworkRanges are CIDR blocks.
type NetworkRanges struct {
	CIDRBlocks []string `json:"cidrBlocks"`
}

// ClusterArtifact is a file nodes download from a URL before installing.
type ClusterArtifact struct {
	// Kind is "binary" (the k3s executable) or "images" (an air-gap
	// images archive).
	Kind   string `json:"kind"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// K3sConfig is the part of a template's clusterconfiguration that EIM
// applies: the original's kthreesConfigSpec.
type K3sConfig struct {
	Files           []K3sFile       `json:"files"`
	AgentConfig     K3sAgentConfig  `json:"agentConfig"`
	ServerConfig    K3sServerConfig `json:"serverConfig"`
	PreK3sCommands  []string        `json:"preK3sCommands"`
	PostK3sCommands []string        `json:"postK3sCommands"`
	Version         string          `json:"version"`
}

// K3sFile is a file written on every node before the installation: its
// content, or (the original's templates) contentFrom a Kubernetes secret
// or config map of the original's management cluster, which EIM resolves
// (FileSourceContent) when it makes the nodes' plans.
type K3sFile struct {
	Path        string         `json:"path"`
	Content     string         `json:"content"`
	Permissions string         `json:"permissions"`
	Owner       string         `json:"owner"`
	ContentFrom *K3sFileSource `json:"contentFrom"`
}

// K3sFileSource is where a file's content comes from: one key of a
// secret or of a config map.
type K3sFileSource struct {
	Secret    *ObjectKeyRef `json:"secret,omitempty"`
	ConfigMap *ObjectKeyRef `json:"configMap,omitempty"`
}

// ObjectKeyRef names one key of a secret or config map.
type ObjectKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

func (s *K3sFileSource) String() string {
	switch {
	case s.Secret != nil:
		return fmt.Sprintf("secret %s key %s", s.Secret.Name, s.Secret.Key)
	case s.ConfigMap != nil:
		return fmt.Sprintf("config map %s key %s", s.ConfigMap.Name, s.ConfigMap.Key)
	}
	return "nothing"
}

// PodSecuritySecret is the secret of the original's management cluster
// its shipped templates take their PodSecurity admission configuration
// from (keys baseline.yaml, privileged.yaml, restricted.yaml).
const PodSecuritySecret = "pod-security-admission-config"

// FileSourceContent is the content of a file source EIM provides: the
// keys of the original's PodSecuritySecret, the same PodSecurity
// configuration EIM's default templates write. There is no management
// cluster holding other secrets: any other source is not found.
func FileSourceContent(s *K3sFileSource) (string, bool) {
	if s == nil || s.Secret == nil || s.Secret.Name != PodSecuritySecret {
		return "", false
	}
	switch s.Secret.Key {
	case "baseline.yaml", "privileged.yaml", "restricted.yaml":
		return PodSecurityAdmission(strings.TrimSuffix(s.Secret.Key, ".yaml")), true
	}
	return "", false
}

// PodSecurityAdmission is the API server's admission configuration
// enforcing the Pod Security Standard level (baseline, restricted,
// privileged) by default, with the kube-system namespace exempt (the
// cluster's own components).
func PodSecurityAdmission(level string) string {
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: %[1]q
      enforce-version: "latest"
      audit: %[1]q
      audit-version: "latest"
      warn: %[1]q
      warn-version: "latest"
    exemptions:
      usernames: []
      runtimeClasses: []
      namespaces: [kube-system]
`, level)
}

// K3sAgentConfig is the configuration of every node's kubelet.
type K3sAgentConfig struct {
	KubeletArgs []string `json:"kubeletArgs"`
	NodeLabels  []string `json:"nodeLabels"`
	NodeTaints  []string `json:"nodeTaints"`
	AirGapped   bool     `json:"airGapped"`
}

// K3sServerConfig is the configuration of the control-plane nodes.
type K3sServerConfig struct {
	KubeAPIServerArg          []string `json:"kubeApiServerArg"`
	KubeControllerManagerArgs []string `json:"kubeControllerManagerArgs"`
	KubeSchedulerArgs         []string `json:"kubeSchedulerArgs"`
	ClusterDomain             string   `json:"clusterDomain"`
	DisableComponents         []string `json:"disableComponents"`
	DisableCloudController    bool     `json:"disableCloudController"`
	TLSSan                    []string `json:"tlsSan"`
}

// K3s returns the template's k3s configuration (empty when the template
// has no clusterconfiguration).
func (t *ClusterTemplate) K3s() (*K3sConfig, error) {
	var doc struct {
		Kind string `json:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					K3s *K3sConfig `json:"kthreesConfigSpec"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if len(bytes.TrimSpace(t.Configuration)) == 0 || string(bytes.TrimSpace(t.Configuration)) == "null" {
		return &K3sConfig{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(t.Configuration))
	if err := dec.Decode(&doc); err != nil {
		return nil, Errorf(EINVALID, "clusterconfiguration: %s", jsonProblem(err))
	}
	if doc.Kind != "" && doc.Kind != "KThreesControlPlaneTemplate" {
		return nil, Errorf(EINVALID, "clusterconfiguration.kind: %q is not KThreesControlPlaneTemplate (EIM installs k3s)", doc.Kind)
	}
	if doc.Spec.Template.Spec.K3s == nil {
		return &K3sConfig{}, nil
	}
	return doc.Spec.Template.Spec.K3s, nil
}

// jsonProblem says what is wrong with a JSON document, without Go's type
// names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return JSONTypeProblem(te)
	}
	return err.Error()
}

// Patterns of templates and clusters (the original's), exported for the
// API's OpenAPI document.
const (
	TemplateNamePattern      = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TemplateVersionPattern   = `^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-dev)?$`
	KubernetesVersionPattern = `^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`
	ClusterNamePattern       = `^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,61}[a-zA-Z0-9])?$`
	ClusterLabelValuePattern = `^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,61}[a-zA-Z0-9])?$`
)

var (
	reTemplateName = regexp.MustCompile(TemplateNamePattern)
	reTemplateVer  = regexp.MustCompile(TemplateVersionPattern)
	reKubeVersion  = regexp.MustCompile(KubernetesVersionPattern)
	reClusterName  = regexp.MustCompile(ClusterNamePattern)
	reLabelValue   = regexp.MustCompile(ClusterLabelValuePattern)
	reLabelName    = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,61}[a-zA-Z0-9])?$`)
	reLabelPrefix  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Limits of templates and clusters.
const (
	MaxClusterNodes     = 1000
	MaxTemplateDesc     = 4096
	maxTemplateConfig   = 256 << 10
	MaxClusterLabels    = 100
	maxTemplateCommands = 100
	maxTemplateFiles    = 100
)

// ValidTemplateVersion reports whether s is a template version (vX.Y.Z,
// or the original's pre-release vX.Y.Z-dev).
func ValidTemplateVersion(s string) bool { return reTemplateVer.MatchString(s) }

// CompareTemplateVersions orders two template versions (vX.Y.Z) by their
// numbers, vX.Y.Z-dev before vX.Y.Z (a pre-release); a malformed one
// sorts by its text.
func CompareTemplateVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	if pa == nil || pb == nil {
		return strings.Compare(a, b)
	}
	for i := range 3 {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	switch da, db := strings.HasSuffix(a, "-dev"), strings.HasSuffix(b, "-dev"); {
	case da && !db:
		return -1
	case db && !da:
		return 1
	}
	return 0
}

func versionParts(s string) []int {
	if !reTemplateVer.MatchString(s) {
		return nil
	}
	out := make([]int, 0, 3)
	for p := range strings.SplitSeq(strings.TrimSuffix(s[1:], "-dev"), ".") {
		n := 0
		for _, r := range p {
			n = n*10 + int(r-'0')
		}
		out = append(out, n)
	}
	return out
}

// ValidTemplateName reports whether s is a template name.
func ValidTemplateName(s string) bool { return len(s) <= 50 && reTemplateName.MatchString(s) }

// ValidClusterName reports whether s is a cluster name, as the
// original's: letters (either case), digits, '-' and '.', starting and
// ending with a letter or digit, at most 63 (the connect gateway's URL
// paths and the kubeconfig carry it).
func ValidClusterName(s string) bool { return reClusterName.MatchString(s) }

// Validate checks a template as the API takes it, naming the first field
// that is wrong.
func (t *ClusterTemplate) Validate() error {
	var c v
	c.required("name", t.Name)
	if t.Name != "" && !ValidTemplateName(t.Name) {
		c.fail("name", "%q is not a template name (lower-case letters, digits, '-' and '.', at most 50)", t.Name)
	}
	c.required("version", t.Version)
	if t.Version != "" && !reTemplateVer.MatchString(t.Version) {
		c.fail("version", "%q is not a version vX.Y.Z (or vX.Y.Z-dev)", t.Version)
	}
	c.required("kubernetesVersion", t.KubernetesVersion)
	if t.KubernetesVersion != "" && (len(t.KubernetesVersion) > 63 || !reKubeVersion.MatchString(t.KubernetesVersion)) {
		c.fail("kubernetesVersion", "%q is not a Kubernetes version (e.g. v1.33.5+k3s1)", t.KubernetesVersion)
	}
	if t.ControlPlaneProvider != "k3s" && t.ControlPlaneProvider != "kubeadm" {
		c.fail("controlplaneprovidertype", "%q is not k3s or kubeadm", t.ControlPlaneProvider)
	}
	if t.InfraProvider != "intel" && t.InfraProvider != "docker" {
		c.fail("infraprovidertype", "%q is not intel or docker", t.InfraProvider)
	}
	if len(t.Description) > MaxTemplateDesc {
		c.fail("description", "is %d bytes long, at most %d allowed", len(t.Description), MaxTemplateDesc)
	}
	if len(t.Configuration) > maxTemplateConfig {
		c.fail("clusterconfiguration", "is %d bytes long, at most %d allowed", len(t.Configuration), maxTemplateConfig)
	}
	c.add(checkCIDRs("clusterNetwork.pods.cidrBlocks", t.Network.Pods.CIDRBlocks))
	c.add(checkCIDRs("clusterNetwork.services.cidrBlocks", t.Network.Services.CIDRBlocks))
	if c.err == nil && overlap(t.Network.Pods.CIDRBlocks, t.Network.Services.CIDRBlocks) {
		c.fail("clusterNetwork", "the pods' and the services' CIDR blocks overlap")
	}
	c.add(CheckClusterLabels("cluster-labels", t.Labels))
	for i, a := range t.Artifacts {
		f := fmt.Sprintf("artifacts[%d]", i)
		if a.Kind != "binary" && a.Kind != "images" {
			c.fail(f+".kind", "%q is not binary or images", a.Kind)
		}
		if !strings.HasPrefix(a.URL, "https://") && !strings.HasPrefix(a.URL, "http://") {
			c.fail(f+".url", "%q is not an http(s) URL", a.URL)
		}
		if !reSha256.MatchString(a.SHA256) {
			c.fail(f+".sha256", "want 64 lower-case hex digits")
		}
	}
	if c.err != nil {
		return c.err
	}
	if t.ControlPlaneProvider == "kubeadm" {
		return nil // kept as imported: no cluster is made of it (Installable)
	}
	k, err := t.K3s()
	if err != nil {
		return err
	}
	return k.validate()
}

// Installable reports whether EIM can make a cluster of t: a k3s
// template whose files' sources it provides (FileSourceContent).
func (t *ClusterTemplate) Installable() error {
	if t.ControlPlaneProvider != "k3s" {
		return Errorf(EINVALID, "template %s-%s: controlplaneprovidertype %s: EIM installs k3s clusters only (choose a k3s template)", t.Name, t.Version, t.ControlPlaneProvider)
	}
	k, err := t.K3s()
	if err != nil {
		return err
	}
	for i, f := range k.Files {
		if f.ContentFrom == nil || f.Content != "" {
			continue
		}
		if _, ok := FileSourceContent(f.ContentFrom); !ok {
			return Errorf(EINVALID, "template %s-%s: files[%d] (%s): its contentFrom, %s, is not one EIM provides (there is no management cluster: only secret %s keys baseline.yaml, privileged.yaml and restricted.yaml are known); give the file's content in a new template version",
				t.Name, t.Version, i, f.Path, f.ContentFrom, PodSecuritySecret)
		}
	}
	return nil
}

func (k *K3sConfig) validate() error {
	var c v
	const pre = "clusterconfiguration.spec.template.spec.kthreesConfigSpec."
	if len(k.Files) > maxTemplateFiles {
		c.fail(pre+"files", "has %d files, at most %d allowed", len(k.Files), maxTemplateFiles)
	}
	for i, f := range k.Files {
		fp := fmt.Sprintf("%sfiles[%d]", pre, i)
		if f.Path == "" && f.Content == "" && f.ContentFrom == nil {
			continue // the original's templates carry an empty file: nothing to write
		}
		if !strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") {
			c.fail(fp+".path", "%q is not an absolute path", f.Path)
		}
		if src := f.ContentFrom; src != nil {
			switch {
			case f.Content != "":
				c.fail(fp+".contentFrom", "a file has content or contentFrom, not both")
			case (src.Secret == nil) == (src.ConfigMap == nil):
				c.fail(fp+".contentFrom", "want one of secret or configMap")
			case src.Secret != nil && (src.Secret.Name == "" || src.Secret.Key == ""):
				c.fail(fp+".contentFrom.secret", "want a name and a key")
			case src.ConfigMap != nil && (src.ConfigMap.Name == "" || src.ConfigMap.Key == ""):
				c.fail(fp+".contentFrom.configMap", "want a name and a key")
			}
		}
		if f.Permissions != "" {
			if _, err := parseMode(f.Permissions); err != nil {
				c.fail(fp+".permissions", "%q is not an octal mode", f.Permissions)
			}
		}
	}
	if n := len(k.PreK3sCommands) + len(k.PostK3sCommands); n > maxTemplateCommands {
		c.fail(pre+"preK3sCommands", "%d commands, at most %d allowed", n, maxTemplateCommands)
	}
	for i, a := range k.ServerConfig.DisableComponents {
		if a == "" || strings.ContainsAny(a, " \n\t") {
			c.fail(fmt.Sprintf("%sserverConfig.disableComponents[%d]", pre, i), "%q is not a component name", a)
		}
	}
	return c.err
}

// ParseFileMode reads a file's octal permissions ("0644"); "" is 0644.
func ParseFileMode(s string) (uint32, error) {
	if s == "" {
		return 0o644, nil
	}
	return parseMode(s)
}

func parseMode(s string) (uint32, error) {
	var m uint32
	if len(s) > 4 {
		return 0, fmt.Errorf("too long")
	}
	for _, r := range s {
		if r < '0' || r > '7' {
			return 0, fmt.Errorf("not octal")
		}
		m = m*8 + uint32(r-'0')
	}
	return m, nil
}

func checkCIDRs(field string, cidrs []string) error {
	if len(cidrs) > 16 {
		return Errorf(EINVALID, "%s: has %d blocks, at most 16 allowed", field, len(cidrs))
	}
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			return Errorf(EINVALID, "%s[%d]: %q is not a CIDR block (network address/length)", field, i, s)
		}
	}
	return nil
}

func overlap(a, b []string) bool {
	for _, x := range a {
		px, _ := netip.ParsePrefix(x)
		for _, y := range b {
			py, _ := netip.ParsePrefix(y)
			if px.Overlaps(py) {
				return true
			}
		}
	}
	return false
}

// CheckClusterLabels checks Kubernetes labels: keys [prefix/]name, values
// up to 63 characters.
func CheckClusterLabels(field string, labels map[string]string) error {
	if len(labels) > MaxClusterLabels {
		return Errorf(EINVALID, "%s: has %d labels, at most %d allowed", field, len(labels), MaxClusterLabels)
	}
	for k, val := range labels {
		name := k
		if prefix, n, ok := strings.Cut(k, "/"); ok {
			if len(prefix) > 253 || !reLabelPrefix.MatchString(prefix) {
				return Errorf(EINVALID, "%s: key %q: %q is not a DNS subdomain prefix", field, k, prefix)
			}
			name = n
		}
		if !reLabelName.MatchString(name) {
			return Errorf(EINVALID, "%s: key %q is not a label name (up to 63 letters, digits, '-', '_', '.')", field, k)
		}
		if !reLabelValue.MatchString(val) {
			return Errorf(EINVALID, "%s: value %q of %q is not a label value (up to 63 letters, digits, '-', '_', '.')", field, val, k)
		}
	}
	return nil
}

// StatusText is a status as the original's cluster manager shows it.
type StatusText struct {
	Message   string           `json:"message"`
	Indicator StatusIndication `json:"indicator"`
	Timestamp uint64           `json:"timestamp"` // unix seconds
}

// ClusterStatus is what the clusters module's reconciler makes of a
// cluster and its nodes' reports.
type ClusterStatus struct {
	KubernetesVersion string     `json:"kubernetesVersion"`
	Lifecycle         StatusText `json:"lifecyclePhase"`
	Provider          StatusText `json:"providerStatus"`
	ControlPlane      StatusText `json:"controlPlaneReady"`
	Infrastructure    StatusText `json:"infrastructureReady"`
	NodeHealth        StatusText `json:"nodeHealth"`
	// Error is the failure the lifecycle stopped at ("" when none): an
	// upgrade waits for a new PUT template.
	Error string `json:"error,omitempty"`
}

// Cluster is an edge Kubernetes cluster: its template, its nodes (hosts of
// the project, each in one cluster at most) and its status.
type Cluster struct {
	ID      string
	Project string
	Name    string
	// The template the cluster is to run; TemplateGen counts the requests
	// to move to it (each PUT template), so that a request repeated after
	// a failure retries.
	TemplateName, TemplateVersion string
	TemplateGen                   int64
	Labels                        map[string]string
	// JoinToken is the cluster's k3s token, sealed (encrypted at rest by
	// the clusters module; the store holds the ciphertext).
	JoinToken []byte
	// The cluster's connect token, sealed, and its credential's ID (the
	// connect module checks its hash).
	ConnectToken   []byte
	ConnectTokenID string
	// Deleting: the cluster is being deleted (its nodes uninstall first);
	// ForceDelete: its rows go without waiting for the nodes.
	Deleting, ForceDelete bool
	Status                ClusterStatus
	CreatedAt, UpdatedAt  Time
	Nodes                 []*ClusterNode
}

// Node returns the cluster's node on host id, or nil.
func (c *Cluster) Node(hostID string) *ClusterNode {
	for _, n := range c.Nodes {
		if n.HostID == hostID {
			return n
		}
	}
	return nil
}

// ClusterNode is a host in a cluster: its role, the plan the server gives
// it (written by the reconciler) and what the node last reported.
type ClusterNode struct {
	HostID string
	Role   ClusterRole
	// Seq orders the nodes by when they joined the cluster.
	Seq int64
	// Removing: the node is to leave the cluster (Force: without a drain).
	Removing, Force bool
	Plan            NodePlan
	Report          NodeReport
}

// NodePlan is what the reconciler decided for a node: the inputs of its
// install plan and their generation. Gen 0: no plan yet.
type NodePlan struct {
	Gen             int64  `json:"gen"`
	Digest          string `json:"digest"`
	TemplateName    string `json:"templateName,omitempty"`
	TemplateVersion string `json:"templateVersion,omitempty"`
	TemplateGen     int64  `json:"templateGen,omitempty"`
	Init            bool   `json:"init,omitempty"`
	ServerURL       string `json:"serverUrl,omitempty"`
	ConnectTokenID  string `json:"connectTokenId,omitempty"`
	// DrainUpgrade: the plan replaces an installed one (an upgrade): the
	// node drains first.
	DrainUpgrade bool `json:"drainUpgrade,omitempty"`
	// Removal: the plan is the node's removal.
	Removal bool `json:"removal,omitempty"`
	Drain   bool `json:"drain,omitempty"`
}

// Version is the plan's version as nodes see it; "" without a plan.
func (p NodePlan) Version(clusterID string) string {
	if p.Gen == 0 {
		return ""
	}
	return fmt.Sprintf("%s.%d", clusterID, p.Gen)
}

// NodeReport is a node's last report of its cluster agent state.
type NodeReport struct {
	State             string
	Message           string
	PlanVersion       string
	KubernetesVersion string
	At                Time
}

// ClusterStore keeps templates and clusters (see sqlstore). Every write
// puts an event of KindCluster (the cluster's ID) or KindClusterTemplate
// (name:version) in the change feed.
type ClusterStore interface {
	// CreateClusterTemplate stores t (ECONFLICT when its name and version
	// exist in the project).
	CreateClusterTemplate(ctx context.Context, t *ClusterTemplate) error
	// ClusterTemplates returns the project's templates by name and
	// version.
	ClusterTemplates(ctx context.Context, project string) ([]*ClusterTemplate, error)
	// DeleteClusterTemplate removes a template; ECONFLICT while a
	// cluster runs it or is moving to or from it.
	DeleteClusterTemplate(ctx context.Context, project, name, version string) error
	// SetDefaultClusterTemplate makes the template the project's default
	// (the one a cluster created without a template gets).
	SetDefaultClusterTemplate(ctx context.Context, project, name, version string) error

	// CreateCluster stores c with its nodes (the nodes' Seq are set by
	// the store, and c.ID when it is empty). A host already in a cluster is ECONFLICT, also
	// when two creations race for it; a name taken is ECONFLICT.
	CreateCluster(ctx context.Context, c *Cluster) error
	// FindCluster returns the project's cluster of that name, or with
	// that ID when name is a cluster ID, with its nodes.
	FindCluster(ctx context.Context, project, name string) (*Cluster, error)
	// ListClusters returns the project's clusters ("": every project's)
	// with their nodes, by name.
	ListClusters(ctx context.Context, project string) ([]*Cluster, error)
	// ClusterOfHost returns the cluster host hostID is a node of, or
	// ENOTFOUND.
	ClusterOfHost(ctx context.Context, project, hostID string) (*Cluster, error)
	// UpdateCluster runs fn on the cluster with ID id, read in a write
	// transaction that keeps other writers of the cluster out, and
	// stores what fn made of it: its fields, nodes added, removed and
	// their plans (never their reports, which ReportClusterNode
	// writes). fn returning an error writes nothing; an added host in
	// another cluster is ECONFLICT.
	UpdateCluster(ctx context.Context, project, id string, fn func(*Cluster) error) (*Cluster, error)
	// DeleteCluster removes the cluster and its nodes.
	DeleteCluster(ctx context.Context, project, id string) error
	// ReportClusterNode records the report of the node on host hostID
	// (ENOTFOUND when the host is in no cluster).
	ReportClusterNode(ctx context.Context, project, hostID string, r NodeReport) error
	// DeleteClustersOf removes every cluster and template of a project
	// being deleted.
	DeleteClustersOf(ctx context.Context, project string) error
}

// ClusterTemplateKey names a template in the change feed.
func ClusterTemplateKey(name, version string) string { return name + ":" + version }

// Now for the cluster's status timestamps.
func statusNow(t time.Time) uint64 { return uint64(t.Unix()) }

// NewStatusText returns a status set at t.
func NewStatusText(msg string, ind StatusIndication, t time.Time) StatusText {
	return StatusText{Message: msg, Indicator: ind, Timestamp: statusNow(t)}
}
