package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/client"
)

// The clusters module in the real server (every module, one process):
// the default project gets the three templates, and the CLI's cluster
// and cluster-template nouns work end to end over the API.
func TestClusterCLI(t *testing.T) {
	dir := t.TempDir()
	url, _ := startServer(t, dir)
	cli := cliRunner{t: t, url: url, tokenFile: filepath.Join(dir, adminTokenFile)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := cli.must("cluster-template", "list", "-o", "id")
		if strings.Contains(out, "baseline-v0.1.0") && strings.Contains(out, "restricted-v0.1.0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("default templates: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tf := filepath.Join(t.TempDir(), "t.json")
	os.WriteFile(tf, []byte(`{"name":"lab","version":"v1.0.0","kubernetesVersion":"v1.34.1+k3s1"}`), 0o600)
	if out := cli.must("cluster-template", "create", tf); strings.TrimSpace(out) != "lab-v1.0.0" {
		t.Fatalf("create template: %q", out)
	}
	// get takes the template as create --template and list -o id name it.
	for _, args := range [][]string{{"lab-v1.0.0"}, {"lab", "v1.0.0"}} {
		var tpl client.ClusterTemplate
		cli.json(&tpl, append([]string{"cluster-template", "get"}, args...)...)
		if tpl.Name != "lab" || tpl.Version != "v1.0.0" {
			t.Fatalf("get %v: %+v", args, tpl)
		}
	}
	if _, err := cli.run("cluster-template", "get", "lab"); err == nil {
		t.Fatal("get lab (no version): no error")
	}
	cli.must("cluster-template", "set-default", "lab")
	if out := cli.must("cluster-template", "list"); !strings.Contains(out, "lab") || !strings.Contains(out, "*") {
		t.Fatalf("list:\n%s", out)
	}
	var hosts []string
	for _, s := range []string{"SNAA1", "SNAA2"} {
		hosts = append(hosts, strings.TrimSpace(cli.must("host", "register", "--serial", s, "-o", "id")))
	}
	if out := cli.must("cluster", "create", "--name", "lab-1", "--node", hosts[0], "--node", hosts[1]+":worker", "--label", "site=a"); strings.TrimSpace(out) != "lab-1" {
		t.Fatalf("create: %q", out)
	}
	var c client.Cluster
	cli.json(&c, "cluster", "get", "lab-1")
	if c.Template != "lab-v1.0.0" || len(c.Nodes) != 2 || c.Labels["site"] != "a" || c.LifecyclePhase.Message != "provisioning" {
		t.Fatalf("get: %+v", c)
	}
	if _, err := cli.run("cluster", "create", "--name", "lab-2", "--node", hosts[0]); err == nil {
		t.Fatal("a host in two clusters: no error")
	}
	var cs []client.Cluster
	cli.json(&cs, "cluster", "list", "--filter", "name=lab*")
	if len(cs) != 1 {
		t.Fatalf("list: %+v", cs)
	}
	cli.must("cluster", "nodes", "remove", "lab-1", hosts[1], "--force")
	cli.json(&c, "cluster", "get", "lab-1")
	if c.NodeQuantity != 1 {
		t.Fatalf("after nodes remove: %d nodes", c.NodeQuantity)
	}
	if _, err := cli.run("cluster-template", "delete", "lab", "v1.0.0"); err == nil {
		t.Fatal("delete a template in use: no error")
	}
	cli.must("cluster", "upgrade", "lab-1", "--template", "baseline", "--version", "v0.1.0")
	cli.must("cluster", "delete", "lab-1", "--force")
	// Forced: gone once the reconciler has been by.
	deadline = time.Now().Add(20 * time.Second)
	for {
		out := cli.must("cluster", "list", "-o", "json")
		var l []client.Cluster
		json.Unmarshal([]byte(out), &l)
		if len(l) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not deleted: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
