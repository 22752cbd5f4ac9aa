package provisioning

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
)

// Where the workflow writes into the installed OS.
const (
	seedDir         = "/var/lib/cloud/seed/nocloud"
	AgentConfigPath = "/etc/eim/agent.json"
	agentBinary     = "/usr/local/bin/eim-agent"
	// rootLabel is the label of the encrypted root the installed OS
	// unlocks: the test OS's (osbuild.RootLabel).
	rootLabel = "eim-root"
)

// Default action timeouts, as the original's (erase 560 s, image stream
// 9800 s, everything else 560 s).
var defaultTimeouts = map[string]time.Duration{
	eim.ActionEraseDisk:   560 * time.Second,
	eim.ActionStreamImage: 9800 * time.Second,
}

const defaultTimeout = 560 * time.Second

// renderInput is everything a workflow is rendered from.
type renderInput struct {
	Instance      *eim.Instance
	Host          *eim.Host
	OS            *eim.OS
	Account       *eim.LocalAccount // nil: no local account
	CustomConfigs []*eim.CustomConfig
}

// render returns the actions that install in.OS on in.Host, or an EINVALID
// error saying what is wrong with the OS profile.
func (s *Service) render(in renderInput) ([]eim.WorkflowAction, error) {
	if err := checkImage(in.OS); err != nil {
		return nil, err
	}
	userData, err := s.userData(in)
	if err != nil {
		return nil, err
	}
	metaData := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", in.Instance.ResourceID, in.Host.ResourceID)
	label := "EIM " + in.OS.Name
	actions := []eim.WorkflowAction{
		{Name: "erase-disk", Type: eim.ActionEraseDisk, Params: map[string]string{"device": ""}},
		{Name: "stream-image", Type: eim.ActionStreamImage, Params: map[string]string{
			"url": in.OS.ImageURL, "sha256": strings.ToLower(in.OS.Sha256), "device": "",
			"compression": "", "caCertPem": in.OS.TLSCaCert,
		}},
		// Full-disk encryption (between the image and what is written
		// into it): inserted below when the instance asks for it.
		{Name: "write-meta-data", Type: eim.ActionWriteFile, Params: map[string]string{
			"device": "", "partition": "0", "path": seedDir + "/meta-data", "content": metaData, "mode": "0644",
		}},
		{Name: "write-user-data", Type: eim.ActionWriteFile, Params: map[string]string{
			"device": "", "partition": "0", "path": seedDir + "/user-data", "content": userData, "mode": "0600",
		}},
		{Name: "write-agent-config", Type: eim.ActionWriteAgentConfig, Params: map[string]string{
			"device": "", "partition": "0", "path": AgentConfigPath,
		}},
		{Name: "set-boot-order", Type: eim.ActionSetBootOrder, Params: map[string]string{"device": "", "label": label}},
		{Name: "reboot", Type: eim.ActionReboot},
	}
	if in.Instance.SecurityFeature == sbRequired {
		// The root partition (the largest: the one written into below),
		// found again at boot by its LUKS2 label.
		enc := eim.WorkflowAction{Name: "encrypt-root", Type: eim.ActionEncryptRoot, Params: map[string]string{
			"device": "", "partition": "0", "pcrs": fdePCRs, "label": rootLabel,
		}}
		actions = slices.Insert(actions, 2, enc)
	}
	for i := range actions {
		actions[i].TimeoutSeconds = int(s.timeout(actions[i].Name, actions[i].Type) / time.Second)
		actions[i].State = eim.ActionPending
	}
	return actions, nil
}

// timeout returns the timeout of an action: an override by name, then by
// type, then the default.
func (s *Service) timeout(name, typ string) time.Duration {
	if d, ok := s.timeouts[name]; ok && d > 0 {
		return d
	}
	if d, ok := s.timeouts[typ]; ok && d > 0 {
		return d
	}
	if d, ok := defaultTimeouts[typ]; ok {
		return d
	}
	return defaultTimeout
}

// checkImage refuses an OS profile the agent cannot install.
func checkImage(os *eim.OS) error {
	if os.ImageURL == "" {
		return eim.Errorf(eim.EINVALID, "OS %s (%s) has no imageUrl; set the URL of its disk image", os.ResourceID, os.Name)
	}
	u, err := url.Parse(os.ImageURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return eim.Errorf(eim.EINVALID, "OS %s (%s): imageUrl %q is not an http(s) URL", os.ResourceID, os.Name, os.ImageURL)
	}
	if !validSha256(os.Sha256) {
		return eim.Errorf(eim.EINVALID, "OS %s (%s): sha256 %q is not 64 hex digits; set the SHA-256 of its image", os.ResourceID, os.Name, os.Sha256)
	}
	return nil
}

func validSha256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// cloudConfig is the part of the user-data EIM writes itself.
type cloudConfig struct {
	Hostname         string      `yaml:"hostname"`
	PreserveHostname bool        `yaml:"preserve_hostname"`
	Users            []any       `yaml:"users,omitempty"`
	CACerts          *caCerts    `yaml:"ca_certs,omitempty"`
	WriteFiles       []cloudFile `yaml:"write_files,omitempty"`
	Runcmd           [][]string  `yaml:"runcmd,omitempty"`
	SSHPwauth        bool        `yaml:"ssh_pwauth"`
	DisableRoot      bool        `yaml:"disable_root"`
}

type cloudUser struct {
	Name              string   `yaml:"name"`
	Sudo              string   `yaml:"sudo"`
	Shell             string   `yaml:"shell"`
	LockPasswd        bool     `yaml:"lock_passwd"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys,omitempty"`
}

type caCerts struct {
	Trusted []string `yaml:"trusted"`
}

type cloudFile struct {
	Path        string `yaml:"path"`
	Permissions string `yaml:"permissions"`
	Content     string `yaml:"content"`
}

// agentUnit runs the agent in node mode on the installed OS; the config it
// reads is written by the write-agent-config action.
const agentUnit = `[Unit]
Description=EIM node agent
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=` + agentBinary + ` node --config ` + AgentConfigPath + `
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`

// userData renders the cloud-init user-data: EIM's cloud-config, then each
// custom config as its own part of a MIME multipart archive (cloud-init
// merges them in order).
func (s *Service) userData(in renderInput) (string, error) {
	cc := cloudConfig{
		Hostname:    in.Host.ResourceID,
		Users:       []any{"default"},
		DisableRoot: true,
		WriteFiles: []cloudFile{{
			Path: "/etc/systemd/system/eim-agent.service", Permissions: "0644", Content: agentUnit,
		}},
		Runcmd: [][]string{{"systemctl", "enable", "--now", "eim-agent.service"}},
	}
	if a := in.Account; a != nil {
		u := cloudUser{Name: a.Username, Sudo: "ALL=(ALL) NOPASSWD:ALL", Shell: "/bin/bash", LockPasswd: true}
		if k := strings.TrimSpace(a.SSHKey); k != "" {
			u.SSHAuthorizedKeys = []string{k}
		}
		cc.Users = append(cc.Users, u)
	}
	if len(s.caPEM) > 0 {
		cc.CACerts = &caCerts{Trusted: []string{string(s.caPEM)}}
	}
	y, err := yaml.Marshal(cc)
	if err != nil {
		return "", fmt.Errorf("render cloud-config: %w", err)
	}
	own := "#cloud-config\n" + string(y)
	if len(in.CustomConfigs) == 0 {
		return own, nil
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	// A fixed boundary keeps the rendering deterministic; it cannot occur
	// in a part because parts are checked below.
	const boundary = "EIM-CLOUD-INIT-PART-BOUNDARY"
	if err := mw.SetBoundary(boundary); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\nMIME-Version: 1.0\n\n", boundary)
	parts := []struct{ name, body string }{{"eim.cfg", own}}
	for _, c := range in.CustomConfigs {
		if strings.Contains(c.Config, boundary) {
			return "", eim.Errorf(eim.EINVALID, "custom config %s (%s) contains the text %q", c.ResourceID, c.Name, boundary)
		}
		parts = append(parts, struct{ name, body string }{c.Name, c.Config})
	}
	for i, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", partType(p.body)+`; charset="utf-8"`)
		h.Set("Content-Disposition", "attachment; filename="+strconv.Quote(p.name))
		if i > 0 {
			// Custom configs add to EIM's part and never replace it: lists
			// (runcmd, users, write_files) are appended, keys already set
			// (hostname, the agent's unit) are kept.
			h.Set("Merge-Type", customMerge)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			return "", err
		}
		if _, err := w.Write([]byte(p.body)); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// customMerge is cloud-init's merge rule for the custom config parts.
const customMerge = "list(append)+dict(no_replace,recurse_list)+str()"

// partType is the cloud-init content type of a user-data part, from its
// first line as cloud-init itself decides.
func partType(body string) string {
	switch first, _, _ := strings.Cut(strings.TrimLeft(body, " \t\r\n"), "\n"); {
	case strings.HasPrefix(first, "#!"):
		return "text/x-shellscript"
	case strings.HasPrefix(first, "#cloud-boothook"):
		return "text/cloud-boothook"
	case strings.HasPrefix(first, "## template: jinja"):
		return "text/jinja2"
	default:
		return "text/cloud-config"
	}
}
