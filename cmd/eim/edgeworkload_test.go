package main

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/workloads"
)

// flottaDoc is a Flotta EdgeWorkload as its users have them.
const flottaDoc = `apiVersion: management.project-flotta.io/v1alpha1
kind: EdgeWorkload
metadata:
  name: nginx
  namespace: default
spec:
  deviceSelector:
    matchLabels:
      app: web
  type: pod
  data:
    egress:
      - source: logs
        target: nginx-logs
  pod:
    spec:
      containers:
        - name: nginx
          image: docker.io/library/nginx:1.27
          ports:
            - containerPort: 80
              hostPort: 9090
`

// TestEdgeWorkloadCLI: eim edgeworkload apply (a Flotta document
// unchanged, then EIM's own YAML with a new revision and a warning),
// list, get, status, a document EIM cannot map refused naming the field,
// delete; against the workloads module's API on a real store.
func TestEdgeWorkloadCLI(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateProject(ctx, &eim.Project{Name: "default", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key, _ := seal.New(raw)
	svc, err := workloads.New(workloads.Options{Store: st, FeedStore: st, Inventory: inventory.New(st, inventory.Options{}), Key: key, Authenticator: oneToken{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hd := range svc.Routes() {
		mux.Handle(p, hd)
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := &cli{ctx: ctx, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		err := c.run(append([]string{"--server", hs.URL, "--token-file", tok, "edgeworkload"}, args...))
		return out.String() + errOut.String(), err
	}
	out, err := run(flottaDoc, "apply", "-f", "-")
	if err != nil || !strings.Contains(out, "nginx") || !strings.Contains(out, "app=web") {
		t.Fatalf("apply a Flotta document: %v\n%s", err, out)
	}
	w, err := st.FindEdgeWorkload(ctx, "default", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	if w.Spec.Pod.Spec.Containers[0].Ports[0].HostPort != 9090 || w.Spec.Data.Egress[0].Target != "nginx-logs" {
		t.Fatalf("Flotta fields not mapped: %+v", w.Spec)
	}
	own := filepath.Join(dir, "nginx.yaml")
	if err := os.WriteFile(own, []byte(`name: nginx
spec:
  deviceSelector: {matchLabels: {app: web}}
  pod:
    spec:
      containers:
        - {name: nginx, image: docker.io/library/nginx}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run("", "apply", "-f", own)
	if err != nil || !strings.Contains(out, "warning: pod.spec.containers[0].image") {
		t.Fatalf("apply EIM's own YAML: %v\n%s", err, out)
	}
	out, err = run("", "list")
	if err != nil || !strings.Contains(out, "nginx") || !strings.Contains(out, " 2 ") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err = run("", "get", "nginx"); err != nil || !strings.Contains(out, `"revision": 2`) {
		t.Fatalf("get: %v\n%s", err, out)
	}
	if out, err = run("", "status", "nginx"); err != nil || !strings.Contains(out, "0 devices") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	bad := strings.Replace(flottaDoc, "  type: pod\n", "  type: pod\n  imageRegistries:\n    secretRef:\n      name: pull\n", 1)
	if out, err = run(bad, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.imageRegistries.secretRef") {
		t.Fatalf("a Flotta document with a secretRef: got %v %s, want it refused naming the field", err, out)
	}
	unknown := strings.Replace(flottaDoc, "  type: pod\n", "  type: pod\n  colour: red\n", 1)
	if _, err = run(unknown, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("a Flotta document with an unknown field: got %v, want it refused naming the field", err)
	}
	// Rollouts: a policy alone, then a new image rolled out under it.
	policy := "  rolloutPolicy:\n    batches: [{limit: 10%}, {limit: 2, updateTimeout: 5m}]\n    successThreshold: 90%\n    disruptionBudget: {groupBy: [eim.io/site], maxUnavailable: 1}\n"
	withPolicy := func(image string) string {
		return "name: nginx\nspec:\n  deviceSelector: {matchLabels: {app: web}}\n  pod:\n    spec:\n      containers:\n        - {name: nginx, image: " + image + "}\n" + policy
	}
	if out, err = run(withPolicy("docker.io/library/nginx"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply a rollout policy: %v\n%s", err, out)
	}
	if w, _ := st.FindEdgeWorkload(ctx, "default", "nginx"); w.Revision != 2 || w.Spec.RolloutPolicy == nil || w.Spec.RolloutPolicy.Batches[1].Limit != "2" {
		t.Fatalf("the policy alone: got revision %d policy %+v, want revision 2 with the policy", w.Revision, w.Spec.RolloutPolicy)
	}
	if _, err = run("", "rollout", "status", "nginx"); err == nil || !strings.Contains(err.Error(), "no rollout yet") {
		t.Fatalf("rollout status before the engine ran: got %v, want no rollout yet", err)
	}
	if err := svc.ReconcileProject(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if out, err = run(withPolicy("docker.io/library/nginx:1.28"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply revision 3: %v\n%s", err, out)
	}
	if err := svc.ReconcileProject(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if out, err = run("", "rollout", "status", "nginx"); err != nil || !strings.Contains(out, "revision 2 to revision 3: DONE") || !strings.Contains(out, "batch 3 of 3") {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	if out, err = run("", "status", "nginx"); err != nil || !strings.Contains(out, "rollout to revision 3: DONE") {
		t.Fatalf("status with a rollout: %v\n%s", err, out)
	}
	if _, err = run("", "rollout", "pause", "nginx"); err == nil || !strings.Contains(err.Error(), "is DONE") {
		t.Fatalf("pause a done rollout: got %v, want it refused", err)
	}
	if out, err = run("", "rollout", "rollback", "nginx"); err != nil || !strings.Contains(out, "revision 4") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if w, _ := st.FindEdgeWorkload(ctx, "default", "nginx"); w.Spec.Pod.Spec.Containers[0].Image != "docker.io/library/nginx" {
		t.Fatalf("rollback: got image %s, want revision 2's", w.Spec.Pod.Spec.Containers[0].Image)
	}
	if _, err = run("", "rollout", "sideways", "nginx"); err == nil {
		t.Fatal("rollout sideways: got no error")
	}
	if out, err = run("", "delete", "nginx"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if _, err := st.FindEdgeWorkload(ctx, "default", "nginx"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("after delete: %v", err)
	}
}
