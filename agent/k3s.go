package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
)

// K3s installs a node's cluster plan with k3s, the one distribution
// EIM's clusters use: the binary to /usr/local/bin/k3s, air-gap images
// where k3s imports them at start, config.yaml and an EIM drop-in with the
// join settings (the token in a root-only file the drop-in names), the
// template's files, and systemd units (k3s server on control-plane nodes,
// k3s agent on workers, the connect agent beside a server). It remembers
// what it installed in StateDir/k3s.json, so a plan applied again changes
// nothing, an interrupted one resumes, and a removal knows what to remove.
// docs/clusters-node.md describes the files.
type K3s struct {
	// Root is prefixed to every path written or removed ("" on a real
	// node; a directory in tests). Commands name the node's own paths.
	Root string
	// StateDir keeps k3s.json (default Root/var/lib/eim-agent);
	// CacheDir the verified artifacts (default StateDir/artifacts).
	StateDir string
	CacheDir string
	// System runs systemctl, k3s and pre-install commands; nil: Host.
	System System
	// NodeName is the node's name in the cluster when the plan's
	// config.yaml names none (k3s then takes the hostname).
	NodeName string
	// AgentPath is the eim-agent binary the connect unit runs (default
	// /usr/local/bin/eim-agent).
	AgentPath string
	// Project is the node's project (name): the connect agent's cluster
	// is PROJECT/CLUSTER.
	Project string
	// CACertPEM is EIM's CA, written for the connect agent to pin.
	CACertPEM string
	// ReadyTimeout bounds the wait for the node to be Ready (default 10
	// min), polled every PollInterval (default 5 s).
	ReadyTimeout time.Duration
	PollInterval time.Duration
	Logger       *slog.Logger

	rec *k3sRecord
}

// System is how K3s acts on the node beyond its files: programs
// (systemctl, the k3s binary's kubectl, sh for pre-install commands) and
// the processes and mounts a stopped k3s leaves.
type System interface {
	// Run runs a program and returns its combined output.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	// Release kills the processes whose executable lies under one of dirs
	// (the containers' shims outlive k3s's service) and unmounts what is
	// mounted under them, deepest first. A dir ending in "-" is a prefix
	// of names (/run/netns/cni-: the pods' network namespaces).
	Release(ctx context.Context, dirs []string) error
}

// The node's paths (Root is prefixed when writing).
const (
	k3sBinary       = "/usr/local/bin/k3s"
	k3sImagesDir    = "/var/lib/rancher/k3s/agent/images"
	k3sConfig       = "/etc/rancher/k3s/config.yaml"
	k3sDropIn       = "/etc/rancher/k3s/config.yaml.d/90-eim.yaml"
	k3sTokenFile    = "/etc/rancher/k3s/eim-join-token"
	k3sAdminConfig  = "/etc/rancher/k3s/k3s.yaml"
	k3sKubeletConf  = "/var/lib/rancher/k3s/agent/kubelet.kubeconfig"
	k3sDrainRBAC    = "/var/lib/rancher/k3s/server/manifests/eim-node-drain.yaml"
	k3sServerTLS    = "/var/lib/rancher/k3s/server/tls"
	unitDir         = "/etc/systemd/system"
	unitServer      = "k3s.service"
	unitAgent       = "k3s-agent.service"
	unitConnect     = "eim-connect.service"
	connectDir      = "/etc/eim/connect"
	connectToken    = connectDir + "/token"
	connectCA       = connectDir + "/ca.crt"
	k3sUninstall    = "/usr/local/bin/k3s-uninstall.sh"
	k3sAgentUninst  = "/usr/local/bin/k3s-agent-uninstall.sh"
	defaultAgentBin = "/usr/local/bin/eim-agent"
)

// k3sDataDirs are removed by an uninstall, after the processes and mounts
// under them are released.
var k3sDataDirs = []string{"/var/lib/rancher/k3s", "/etc/rancher/k3s", "/var/lib/kubelet", "/run/k3s", "/run/flannel"}

// k3sRecord is what K3s installed (k3s.json).
type k3sRecord struct {
	// Version of the plan installed completely; Kubernetes its version.
	Version    string `json:"version,omitempty"`
	Kubernetes string `json:"kubernetes,omitempty"`
	Cluster    string `json:"cluster,omitempty"`
	// Server: a k3s server (control plane); else an agent (worker).
	Server   bool   `json:"server,omitempty"`
	NodeName string `json:"nodeName,omitempty"`
	// Units enabled and files written (node paths), for a removal.
	Units  []string `json:"units,omitempty"`
	Files  []string `json:"files,omitempty"`
	Binary bool     `json:"binary,omitempty"`
	// PreInstall is the plan version whose pre-install commands ran,
	// PreInstallDone how many of them succeeded.
	PreInstall     string `json:"preInstall,omitempty"`
	PreInstallDone int    `json:"preInstallDone,omitempty"`
	// Cordoned: drained for an upgrade and not yet uncordoned.
	Cordoned bool `json:"cordoned,omitempty"`
}

func (k *K3s) log() *slog.Logger {
	if k.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.Logger
}

func (k *K3s) sys() System {
	if k.System == nil {
		return Host{}
	}
	return k.System
}

func (k *K3s) stateDir() string {
	if k.StateDir != "" {
		return k.StateDir
	}
	return k.host("/var/lib/eim-agent")
}

func (k *K3s) cache() *ArtifactCache {
	if k.CacheDir != "" {
		return &ArtifactCache{Dir: k.CacheDir}
	}
	return &ArtifactCache{Dir: filepath.Join(k.stateDir(), "artifacts")}
}

// host is the path written for the node path p.
func (k *K3s) host(p string) string { return filepath.Join(k.Root, filepath.FromSlash(p)) }

func (k *K3s) record() *k3sRecord {
	if k.rec != nil {
		return k.rec
	}
	k.rec = &k3sRecord{}
	b, err := os.ReadFile(filepath.Join(k.stateDir(), "k3s.json"))
	if err == nil && json.Unmarshal(b, k.rec) != nil {
		// Damaged: what is on the node is found again by the next
		// install (it compares files), and a removal removes the
		// well-known paths.
		k.rec = &k3sRecord{Files: []string{k3sConfig, k3sDropIn, k3sTokenFile}, Units: []string{unitServer, unitAgent, unitConnect}}
	}
	return k.rec
}

func (k *K3s) save() error {
	b, err := json.MarshalIndent(k.record(), "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(k.stateDir(), "k3s.json"), b, 0o600, 0o700)
}

// Installed implements ClusterInstaller.
func (k *K3s) Installed() (string, bool) {
	r := k.record()
	return r.Kubernetes, r.Version != "" || r.Binary || len(r.Units) > 0 || len(r.Files) > 0
}

// checkPlan refuses a plan this installer cannot apply, naming the field.
func checkPlan(p *clusterv1.Plan) error {
	if d := p.GetDistribution(); d != "" && d != "k3s" {
		return fmt.Errorf("distribution %q: this agent installs k3s only", d)
	}
	if p.GetRole() == clusterv1.Plan_ROLE_UNSPECIFIED {
		return errors.New("role is unspecified")
	}
	if p.GetKubernetesVersion() == "" {
		return errors.New("kubernetes_version is empty")
	}
	if p.GetJoinToken() == "" {
		return errors.New("join_token is empty")
	}
	if !p.GetInit() && p.GetServerUrl() == "" {
		return errors.New("server_url is empty on a node that does not initialise the cluster")
	}
	binaries := 0
	names := map[string]bool{}
	for i, a := range p.GetArtifacts() {
		if _, err := checkDigest(a.GetSha256()); err != nil {
			return fmt.Errorf("artifacts[%d] (%s): %w", i, a.GetName(), err)
		}
		if n := a.GetName(); n == "" || n != path.Base(n) || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return fmt.Errorf("artifacts[%d]: name %q is not a plain file name", i, a.GetName())
		}
		if names[a.GetName()] {
			return fmt.Errorf("artifacts[%d]: name %q twice", i, a.GetName())
		}
		names[a.GetName()] = true
		switch a.GetKind() {
		case clusterv1.Artifact_KIND_BINARY:
			binaries++
		case clusterv1.Artifact_KIND_IMAGES:
		default:
			return fmt.Errorf("artifacts[%d] (%s): kind %v", i, a.GetName(), a.GetKind())
		}
	}
	if binaries > 1 {
		return fmt.Errorf("artifacts: %d binaries, want one", binaries)
	}
	for i, f := range p.GetFiles() {
		if err := checkNodePath(f.GetPath()); err != nil {
			return fmt.Errorf("files[%d]: %w", i, err)
		}
		if f.GetMode() > 0o7777 {
			return fmt.Errorf("files[%d] (%s): mode %o is not permission bits", i, f.GetPath(), f.GetMode())
		}
	}
	if c := p.GetConnect(); c != nil && p.GetRole() != clusterv1.Plan_ROLE_WORKER {
		if !strings.HasPrefix(c.GetServerUrl(), "https://") || c.GetToken() == "" {
			return errors.New("connect: server_url (https) and token are required")
		}
	}
	return nil
}

// checkNodePath refuses a path that is not absolute and clean.
func checkNodePath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("path %q is not an absolute, clean file path", p)
	}
	return nil
}

func artifactOf(a *clusterv1.Artifact) Artifact {
	d, _ := checkDigest(a.GetSha256())
	return Artifact{Name: a.GetName(), Location: a.GetUrl(), Sha256: d, Size: int64(a.GetSize())}
}

// Prepare implements ClusterInstaller: it checks p and downloads the
// artifacts the cache does not hold.
func (k *K3s) Prepare(ctx context.Context, p *clusterv1.Plan, f Fetcher) error {
	if err := checkPlan(p); err != nil {
		return fmt.Errorf("the plan: %w", err)
	}
	if !hasBinary(p) {
		if _, err := os.Stat(k.host(k3sBinary)); err != nil {
			return fmt.Errorf("the plan has no k3s binary artifact and %s is not installed", k3sBinary)
		}
	}
	c := k.cache()
	for _, a := range p.GetArtifacts() {
		art := artifactOf(a)
		got, err := c.Get(ctx, f, art)
		if err != nil {
			return fmt.Errorf("artifact %s: %w", a.GetName(), err)
		}
		if got {
			k.log().Info("artifact downloaded and verified", "name", art.Name, "sha256", art.Sha256)
		}
	}
	return nil
}

func hasBinary(p *clusterv1.Plan) bool {
	return slices.ContainsFunc(p.GetArtifacts(), func(a *clusterv1.Artifact) bool { return a.GetKind() == clusterv1.Artifact_KIND_BINARY })
}

func isServer(r clusterv1.Plan_Role) bool {
	return r == clusterv1.Plan_ROLE_ALL || r == clusterv1.Plan_ROLE_CONTROLPLANE
}

// nodeNameOf is the node-name of a k3s config.yaml, or def.
func nodeNameOf(config, def string) (string, error) {
	var c struct {
		NodeName string `yaml:"node-name"`
	}
	if strings.TrimSpace(config) != "" {
		if err := yaml.Unmarshal([]byte(config), &c); err != nil {
			return "", fmt.Errorf("config_yaml: %w", err)
		}
	}
	if c.NodeName != "" {
		return c.NodeName, nil
	}
	if def == "" {
		return "", errors.New("config_yaml names no node-name and the node's hostname is unknown")
	}
	return strings.ToLower(def), nil
}

// Install implements ClusterInstaller.
func (k *K3s) Install(ctx context.Context, version string, p *clusterv1.Plan) (string, error) {
	if err := checkPlan(p); err != nil {
		return "", fmt.Errorf("the plan: %w", err)
	}
	name, err := nodeNameOf(p.GetConfigYaml(), k.NodeName)
	if err != nil {
		return "", err
	}
	r := k.record()
	server := isServer(p.GetRole())
	upgrade := r.Kubernetes != "" && r.Kubernetes != p.GetKubernetesVersion()
	if r.NodeName == "" {
		r.NodeName = name
	}
	if upgrade && p.GetDrainBeforeUpgrade() && !r.Cordoned {
		k.log().Info("draining before the upgrade", "from", r.Kubernetes, "to", p.GetKubernetesVersion())
		r.Cordoned = true // a drain cordons first: uncordon even if it fails halfway
		if err := k.save(); err != nil {
			return "", fmt.Errorf("record: %w", err)
		}
		if err := k.drain(ctx, seconds(p.GetDrainTimeoutSeconds(), 5*time.Minute)); err != nil {
			return "", fmt.Errorf("drain before the upgrade: %w", err)
		}
	}
	if err := k.preInstall(ctx, version, p.GetPreInstallCommands()); err != nil {
		return "", err
	}
	changed, err := k.writeFiles(p, server)
	if err != nil {
		return "", err
	}
	unit, units, unitsChanged, err := k.writeUnits(ctx, p, server, name)
	if err != nil {
		return "", err
	}
	s := k.sys()
	if unitsChanged {
		if out, err := s.Run(ctx, "systemctl", "daemon-reload"); err != nil {
			return "", cmdError("systemctl daemon-reload", out, err)
		}
	}
	if err := k.start(ctx, unit, changed || unitsChanged); err != nil {
		return "", err
	}
	if err := k.waitReady(ctx, server, name); err != nil {
		return "", err
	}
	if slices.Contains(units, unitConnect) {
		if err := k.start(ctx, unitConnect, unitsChanged); err != nil {
			return "", err
		}
	}
	if r.Cordoned {
		if out, err := s.Run(ctx, k3sBinary, "kubectl", "--kubeconfig", kubeconfigOf(server), "uncordon", name); err != nil {
			return "", cmdError("uncordon", out, err)
		}
		r.Cordoned = false
	}
	r.Version, r.Kubernetes, r.Cluster, r.Server, r.NodeName = version, p.GetKubernetesVersion(), p.GetClusterName(), server, name
	if err := k.save(); err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	return fmt.Sprintf("k3s %s runs as %s; node %s is Ready", p.GetKubernetesVersion(), roleName(p.GetRole()), name), nil
}

// preInstall runs the plan's pre-install commands that have not run for
// this version, in order, recording each one that succeeded.
func (k *K3s) preInstall(ctx context.Context, version string, cmds []string) error {
	r := k.record()
	if r.PreInstall != version {
		r.PreInstall, r.PreInstallDone = version, 0
	}
	for i := r.PreInstallDone; i < len(cmds); i++ {
		out, err := k.sys().Run(ctx, "sh", "-c", cmds[i])
		if err != nil {
			return fmt.Errorf("pre-install command %d (%s): %w%s", i+1, truncate(cmds[i], 80), err, outputTail(out))
		}
		r.PreInstallDone = i + 1
		if err := k.save(); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	return nil
}

// writeFiles puts the binary, images, configuration, token and the
// template's files in place; it reports whether any changed (k3s then
// restarts to take them).
func (k *K3s) writeFiles(p *clusterv1.Plan, server bool) (bool, error) {
	r := k.record()
	changed := false
	c := k.cache()
	for _, a := range p.GetArtifacts() {
		art := artifactOf(a)
		dst, mode := k3sBinary, os.FileMode(0o755)
		if a.GetKind() == clusterv1.Artifact_KIND_IMAGES {
			dst, mode = path.Join(k3sImagesDir, art.Name), 0o644
		}
		if fileDigest(k.host(dst)) == art.Sha256 {
			continue
		}
		if a.GetKind() == clusterv1.Artifact_KIND_BINARY {
			r.Binary = true
		} else {
			k.track(dst)
		}
		if err := k.save(); err != nil { // before the write: a removal must find it
			return false, fmt.Errorf("record: %w", err)
		}
		if err := c.CopyOut(art, k.host(dst), mode); err != nil {
			return false, fmt.Errorf("install %s: %w", dst, err)
		}
		changed = true
	}
	type file struct {
		path    string
		content string
		mode    os.FileMode
	}
	files := []file{
		{k3sConfig, p.GetConfigYaml(), 0o600},
		{k3sDropIn, k3sDropInOf(p, server), 0o600},
		{k3sTokenFile, p.GetJoinToken() + "\n", 0o600},
	}
	if server {
		files = append(files, file{k3sDrainRBAC, drainRBAC, 0o600})
	}
	for _, f := range p.GetFiles() {
		mode := os.FileMode(f.GetMode())
		if mode == 0 {
			mode = 0o644
		}
		files = append(files, file{f.GetPath(), f.GetContent(), mode})
	}
	for _, f := range files {
		k.track(f.path)
		w, err := k.writeIfChanged(f.path, []byte(f.content), f.mode)
		if err != nil {
			return false, err
		}
		changed = changed || w
	}
	return changed, k.save()
}

// track adds a node path to the files a removal removes.
func (k *K3s) track(p string) {
	r := k.record()
	if !slices.Contains(r.Files, p) {
		r.Files = append(r.Files, p)
	}
}

// writeIfChanged writes a node file unless it holds content with mode
// already; it reports whether it wrote.
func (k *K3s) writeIfChanged(p string, content []byte, mode os.FileMode) (bool, error) {
	h := k.host(p)
	if st, err := os.Stat(h); err == nil && st.Mode().Perm() == mode.Perm() {
		if b, err := os.ReadFile(h); err == nil && bytes.Equal(b, content) {
			return false, nil
		}
	}
	dirMode := os.FileMode(0o755)
	if mode&0o077 == 0 && strings.HasPrefix(p, connectDir) {
		dirMode = 0o700
	}
	if err := writeFileAtomic(h, content, mode, dirMode); err != nil {
		return false, fmt.Errorf("write %s: %w", p, err)
	}
	return true, nil
}

// k3sDropInOf is EIM's config drop-in: the join settings, with the token
// by file so that it is on no command line and in no file but the one only
// root reads. Strings are JSON-quoted, which YAML reads as they are.
func k3sDropInOf(p *clusterv1.Plan, server bool) string {
	var b strings.Builder
	b.WriteString("# Written by eim-agent from the node's cluster plan; replaced at every plan.\n")
	fmt.Fprintf(&b, "token-file: %s\n", strconv.Quote(k3sTokenFile))
	if p.GetInit() && server {
		b.WriteString("cluster-init: true\n")
	} else {
		fmt.Fprintf(&b, "server: %s\n", strconv.Quote(p.GetServerUrl()))
	}
	return b.String()
}

// NodeDrainManifest is the manifest the control-plane nodes install so
// that every node can drain itself (tests apply it to a real API server).
func NodeDrainManifest() string { return drainRBAC }

// drainRBAC lets every node drain itself with its kubelet's credentials
// (cordon, list and evict the pods on it): a worker has no other
// credentials, and EIM drains a worker from the worker. k3s applies
// manifests of this directory at start. It does not let a node evict
// another node's pods: the API server's NodeRestriction admission (on in
// k3s) refuses a node's eviction of a pod not bound to it, and the Node
// authorizer a node's change of another Node (its cordon); tested on a
// real API server (cmd/eim TestNodeDrainRBAC).
const drainRBAC = `# Written by eim-agent: nodes drain themselves before an upgrade or a removal.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: eim-node-drain
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
- apiGroups: ["apps"]
  resources: ["daemonsets", "replicasets", "statefulsets"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: eim-node-drain
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: eim-node-drain
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
`

// writeUnits writes the systemd units the role runs and removes those it
// does not (a node that changed role). It returns the k3s unit, the units
// enabled and whether any unit file changed.
func (k *K3s) writeUnits(ctx context.Context, p *clusterv1.Plan, server bool, name string) (string, []string, bool, error) {
	r := k.record()
	unit, other := unitServer, unitAgent
	content := k3sUnit("server")
	if !server {
		unit, other = unitAgent, unitServer
		content = k3sUnit("agent")
	}
	want := map[string][]byte{unit: []byte(content)}
	if c := p.GetConnect(); c != nil && server {
		cluster := p.GetClusterName()
		if k.Project != "" {
			cluster = k.Project + "/" + cluster
		}
		want[unitConnect] = []byte(k.connectUnit(c, cluster))
		for _, f := range []struct {
			path, content string
		}{{connectToken, c.GetToken() + "\n"}, {connectCA, k.CACertPEM}} {
			k.track(f.path)
			if _, err := k.writeIfChanged(f.path, []byte(f.content), 0o600); err != nil {
				return "", nil, false, err
			}
		}
	}
	changed := false
	for _, u := range []string{other, unitConnect} {
		if _, ok := want[u]; ok || !slices.Contains(r.Units, u) {
			continue
		}
		if out, err := k.sys().Run(ctx, "systemctl", "disable", "--now", u); err != nil {
			return "", nil, false, cmdError("systemctl disable --now "+u, out, err)
		}
		if err := os.Remove(k.host(path.Join(unitDir, u))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", nil, false, err
		}
		r.Units = slices.DeleteFunc(r.Units, func(s string) bool { return s == u })
		changed = true
	}
	var units []string
	for _, u := range []string{unit, unitConnect} {
		c, ok := want[u]
		if !ok {
			continue
		}
		units = append(units, u)
		if !slices.Contains(r.Units, u) {
			r.Units = append(r.Units, u)
		}
		if err := k.save(); err != nil {
			return "", nil, false, fmt.Errorf("record: %w", err)
		}
		w, err := k.writeIfChanged(path.Join(unitDir, u), c, 0o644)
		if err != nil {
			return "", nil, false, err
		}
		changed = changed || w
	}
	return unit, units, changed, nil
}

// k3sUnit is the systemd unit of k3s server or agent. KillMode=process:
// restarting k3s (an upgrade) leaves the containers running.
func k3sUnit(mode string) string {
	return `# Written by eim-agent from the node's cluster plan.
[Unit]
Description=k3s ` + mode + ` (EIM cluster node)
Documentation=https://docs.k3s.io
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=` + k3sBinary + ` ` + mode + `
KillMode=process
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
`
}

// connectUnit is the connect agent's unit: the tunnel to EIM's gateway,
// proxying to the local API server with k3s's admin client certificate.
// The token is in a file; nothing secret is on its command line.
func (k *K3s) connectUnit(c *clusterv1.Connect, cluster string) string {
	bin := k.AgentPath
	if bin == "" {
		bin = defaultAgentBin
	}
	upstream := c.GetUpstream()
	if upstream == "" {
		upstream = "https://127.0.0.1:6443"
	}
	args := []string{bin, "connect", "--server", c.GetServerUrl(), "--ca", connectCA, "--cluster", cluster,
		"--token-file", connectToken, "--upstream", upstream,
		"--upstream-ca", k3sServerTLS + "/server-ca.crt",
		"--upstream-cert", k3sServerTLS + "/client-admin.crt", "--upstream-key", k3sServerTLS + "/client-admin.key"}
	for i, a := range args {
		args[i] = systemdQuote(a)
	}
	return `# Written by eim-agent from the node's cluster plan.
[Unit]
Description=EIM connect tunnel of the cluster's API
After=` + unitServer + `
Wants=` + unitServer + `

[Service]
ExecStart=` + strings.Join(args, " ") + `
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
`
}

// systemdQuote quotes a word of ExecStart when it needs it.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// start enables a unit and starts it, restarting it when what it runs
// changed. --no-block: k3s tells systemd it is ready only once it joined,
// and the wait for that is waitReady's, with its timeout.
func (k *K3s) start(ctx context.Context, unit string, restart bool) error {
	s := k.sys()
	if out, err := s.Run(ctx, "systemctl", "enable", unit); err != nil {
		return cmdError("systemctl enable "+unit, out, err)
	}
	verb := "start"
	if restart {
		verb = "restart"
	}
	if out, err := s.Run(ctx, "systemctl", "--no-block", verb, unit); err != nil {
		return cmdError("systemctl "+verb+" "+unit, out, err)
	}
	return nil
}

func kubeconfigOf(server bool) string {
	if server {
		return k3sAdminConfig
	}
	return k3sKubeletConf
}

// waitReady polls the node's Ready condition until it is True or the
// timeout passes.
func (k *K3s) waitReady(ctx context.Context, server bool, name string) error {
	timeout, every := k.ReadyTimeout, k.PollInterval
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		out, err := k.sys().Run(ctx, k3sBinary, "kubectl", "--kubeconfig", kubeconfigOf(server),
			"get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		got := strings.TrimSpace(string(out))
		if err == nil && got == "True" {
			return nil
		}
		if err != nil {
			last = err.Error() + outputTail(out)
		} else {
			last = fmt.Sprintf("Ready is %q", got)
		}
		if time.Now().Add(every).After(deadline) {
			return fmt.Errorf("node %s not Ready after %s: %s", name, timeout, last)
		}
		if err := sleep(ctx, every); err != nil {
			return err
		}
	}
}

// Drain implements ClusterInstaller.
func (k *K3s) Drain(ctx context.Context, timeout time.Duration) error {
	return k.drain(ctx, timeout)
}

// drain cordons the node and evicts its pods (not DaemonSets'), with the
// admin kubeconfig on a server and the kubelet's on a worker (allowed by
// the eim-node-drain role the servers install).
func (k *K3s) drain(ctx context.Context, timeout time.Duration) error {
	r := k.record()
	if r.NodeName == "" {
		return errors.New("the node's name is unknown")
	}
	out, err := k.sys().Run(ctx, k3sBinary, "kubectl", "--kubeconfig", kubeconfigOf(r.Server), "drain", r.NodeName,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout="+timeout.String())
	if err != nil {
		return cmdError("kubectl drain "+r.NodeName, out, err)
	}
	return nil
}

// Uninstall implements ClusterInstaller: k3s's own uninstall script when
// k3s was installed with it, else EIM's: stop and disable the units,
// release what k3s's containers hold, remove the network interfaces and
// rules it made, the files written, the binary and k3s's data. The
// artifact cache goes too.
func (k *K3s) Uninstall(ctx context.Context) error {
	r := k.record()
	s := k.sys()
	for _, script := range []string{k3sUninstall, k3sAgentUninst} {
		if _, err := os.Stat(k.host(script)); err == nil {
			if out, err := s.Run(ctx, "sh", script); err != nil {
				return cmdError(script, out, err)
			}
		}
	}
	for _, u := range []string{unitConnect, unitServer, unitAgent} {
		if !slices.Contains(r.Units, u) {
			continue
		}
		if out, err := s.Run(ctx, "systemctl", "disable", "--now", u); err != nil {
			return cmdError("systemctl disable --now "+u, out, err)
		}
		if err := os.Remove(k.host(path.Join(unitDir, u))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(r.Units) > 0 {
		if out, err := s.Run(ctx, "systemctl", "daemon-reload"); err != nil {
			return cmdError("systemctl daemon-reload", out, err)
		}
	}
	if err := s.Release(ctx, append([]string{"/run/netns/cni-"}, k3sDataDirs...)); err != nil {
		return fmt.Errorf("release k3s's processes and mounts: %w", err)
	}
	// The pod network: absent interfaces and rules are fine.
	for _, link := range []string{"cni0", "flannel.1", "flannel-v6.1", "flannel-wg", "kube-ipvs0"} {
		s.Run(ctx, "ip", "link", "delete", link)
	}
	s.Run(ctx, "sh", "-c", "iptables-save | grep -v -e KUBE- -e CNI- -e FLANNEL -e flannel | iptables-restore")
	remove := append(slices.Clone(r.Files), k3sDataDirs...)
	if r.Binary {
		remove = append(remove, k3sBinary)
	}
	for _, p := range remove {
		if err := os.RemoveAll(k.host(p)); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	if err := os.RemoveAll(k.cache().Dir); err != nil {
		return fmt.Errorf("remove the artifact cache: %w", err)
	}
	if err := os.Remove(filepath.Join(k.stateDir(), "k3s.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	k.rec = &k3sRecord{}
	return nil
}

// cmdError is a failed command with the tail of its output.
func cmdError(what string, out []byte, err error) error {
	return fmt.Errorf("%s: %w%s", what, err, outputTail(out))
}

// outputTail is ": " and the last line(s) of a command's output, up to
// 300 bytes, or "".
func outputTail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	if len(s) > 300 {
		s = "…" + strings.ToValidUTF8(s[len(s)-300:], "")
	}
	return ": " + s
}
