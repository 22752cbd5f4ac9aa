package provisioning_test

import (
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
)

// fileOf returns the content of the write-file action writing path.
func fileOf(t *testing.T, wf *provisioningv1.Workflow, path string) (*provisioningv1.WriteFile, string) {
	t.Helper()
	for _, a := range wf.Actions {
		if f := a.GetWriteFile(); f != nil && f.Path == path {
			return f, string(f.Content)
		}
	}
	t.Fatalf("no write-file action for %s", path)
	return nil, ""
}

func TestRenderCloudInit(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		acct := e.create(&eim.LocalAccount{Username: "ops", SSHKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0000000000000000000000000000000000000000000 ops@example"}).(*eim.LocalAccount)
		cc1 := e.create(&eim.CustomConfig{Name: "ntp", Config: "#cloud-config\nntp:\n  servers: [ntp.example]\n"}).(*eim.CustomConfig)
		cc2 := e.create(&eim.CustomConfig{Name: "hello", Config: "#!/bin/sh\necho hello\n"}).(*eim.CustomConfig)
		in := e.instance(h, e.os("https://images.example/a.raw.xz", goodSha), func(in *eim.Instance) {
			in.LocalAccountID = acct.ResourceID
			in.CustomConfigIDs = []string{cc2.ResourceID, cc1.ResourceID}
		})
		wf := e.getWorkflow(h.ResourceID).Workflow

		md, meta := fileOf(t, wf, "/var/lib/cloud/seed/nocloud/meta-data")
		var mdv map[string]string
		if err := yaml.Unmarshal([]byte(meta), &mdv); err != nil {
			t.Fatalf("meta-data: %v", err)
		}
		if mdv["instance-id"] != in.ResourceID || mdv["local-hostname"] != h.ResourceID || md.Mode != 0o644 {
			t.Fatalf("got meta-data %v mode %o", mdv, md.Mode)
		}
		ud, user := fileOf(t, wf, "/var/lib/cloud/seed/nocloud/user-data")
		if ud.Mode != 0o600 {
			t.Fatalf("got user-data mode %o, want 600", ud.Mode)
		}
		msg, err := mail.ReadMessage(strings.NewReader(user))
		if err != nil {
			t.Fatalf("user-data is not MIME: %v", err)
		}
		mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/mixed" {
			t.Fatalf("got content type %q (%v), want multipart/mixed", mt, err)
		}
		mr := multipart.NewReader(msg.Body, params["boundary"])
		var types, bodies []string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(p)
			ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
			if mt := p.Header.Get("Merge-Type"); (len(types) == 0) != (mt == "") {
				t.Fatalf("part %d has Merge-Type %q: want it on custom configs only", len(types), mt)
			}
			types, bodies = append(types, ct), append(bodies, string(b))
		}
		if strings.Join(types, ",") != "text/cloud-config,text/x-shellscript,text/cloud-config" {
			t.Fatalf("got parts %v", types)
		}
		if bodies[1] != cc2.Config || bodies[2] != cc1.Config {
			t.Fatalf("custom configs not in the instance's order: %q", bodies[1:])
		}
		if !strings.HasPrefix(bodies[0], "#cloud-config\n") {
			t.Fatalf("own part does not start with #cloud-config: %q", bodies[0])
		}
		var cfg struct {
			Hostname string `yaml:"hostname"`
			Users    []any  `yaml:"users"`
			CACerts  struct {
				Trusted []string `yaml:"trusted"`
			} `yaml:"ca_certs"`
			WriteFiles []struct {
				Path    string `yaml:"path"`
				Content string `yaml:"content"`
			} `yaml:"write_files"`
			Runcmd [][]string `yaml:"runcmd"`
		}
		if err := yaml.Unmarshal([]byte(bodies[0]), &cfg); err != nil {
			t.Fatalf("cloud-config: %v", err)
		}
		if cfg.Hostname != h.ResourceID {
			t.Fatalf("got hostname %q, want %q", cfg.Hostname, h.ResourceID)
		}
		if len(cfg.CACerts.Trusted) != 1 || cfg.CACerts.Trusted[0] != testCA {
			t.Fatalf("got CA %q", cfg.CACerts.Trusted)
		}
		if len(cfg.Users) != 2 {
			t.Fatalf("got users %v", cfg.Users)
		}
		u := cfg.Users[1].(map[string]any)
		keys, _ := u["ssh_authorized_keys"].([]any)
		if u["name"] != "ops" || len(keys) != 1 || keys[0] != acct.SSHKey || u["sudo"] != "ALL=(ALL) NOPASSWD:ALL" {
			t.Fatalf("got user %v", u)
		}
		if len(cfg.WriteFiles) != 1 || !strings.Contains(cfg.WriteFiles[0].Content, "eim-agent node --config /etc/eim/agent.json") {
			t.Fatalf("got write_files %v", cfg.WriteFiles)
		}

		var agentCfg *provisioningv1.WriteAgentConfig
		for _, a := range wf.Actions {
			if c := a.GetWriteAgentConfig(); c != nil {
				agentCfg = c
			}
		}
		if agentCfg == nil || agentCfg.Path != provisioning.AgentConfigPath {
			t.Fatalf("got write-agent-config %v", agentCfg)
		}
		if wf.Actions[len(wf.Actions)-1].GetReboot() == nil {
			t.Fatalf("last action is not reboot")
		}
	})
}

func TestRenderPlainCloudConfigWithoutCustomConfigs(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		_, user := fileOf(t, e.getWorkflow(h.ResourceID).Workflow, "/var/lib/cloud/seed/nocloud/user-data")
		if !strings.HasPrefix(user, "#cloud-config\n") {
			t.Fatalf("got user-data %q", user)
		}
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(user), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg["hostname"] != h.ResourceID || cfg["ssh_pwauth"] != false {
			t.Fatalf("got %v", cfg)
		}
	})
}

func TestActionTimeoutOverrides(t *testing.T) {
	e := newEnv(t, t.TempDir()+"/eim.db", func(o *provisioning.Options) {
		o.ActionTimeouts = map[string]time.Duration{eim.ActionStreamImage: time.Hour, "reboot": 30 * time.Second}
	})
	h := e.host()
	e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
	wf := e.getWorkflow(h.ResourceID).Workflow
	got := []uint32{wf.Actions[0].TimeoutSeconds, wf.Actions[1].TimeoutSeconds, wf.Actions[6].TimeoutSeconds}
	if got[0] != 560 || got[1] != 3600 || got[2] != 30 {
		t.Fatalf("got timeouts %v, want [560 3600 30]", got)
	}
}

func TestParseActionTimeout(t *testing.T) {
	for _, c := range []struct {
		in, name string
		d        time.Duration
		err      string
	}{
		{"stream-image=3h", "stream-image", 3 * time.Hour, ""},
		{"write-file=2m", "write-file", 2 * time.Minute, ""},
		{"stream-image", "", 0, "want NAME=DURATION"},
		{"=3h", "", 0, "want NAME=DURATION"},
		{"stream-imag=3h", "", 0, "no action is named stream-imag"},
		{"erase-disk=soon", "", 0, "soon is not a duration"},
		{"erase-disk=5s", "", 0, "outside 1m0s..48h0m0s"},
		{"erase-disk=72h", "", 0, "outside 1m0s..48h0m0s"},
	} {
		name, d, err := provisioning.ParseActionTimeout(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || d != c.d {
			t.Errorf("%q: got %q %v %v, want %q %v", c.in, name, d, err, c.name, c.d)
		}
	}
}

// Every action a workflow is rendered with can be given a timeout, by its
// name and by its type.
func TestEveryRenderedActionHasATimeoutKey(t *testing.T) {
	e := newEnv(t, t.TempDir()+"/eim.db", nil)
	h := e.host()
	e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
	e.getWorkflow(h.ResourceID) // renders it
	for _, a := range e.workflow(h.ResourceID).Actions {
		for _, key := range []string{a.Name, a.Type} {
			if _, _, err := provisioning.ParseActionTimeout(key + "=1h"); err != nil {
				t.Errorf("action %s (type %s): %v", a.Name, a.Type, err)
			}
		}
	}
}
