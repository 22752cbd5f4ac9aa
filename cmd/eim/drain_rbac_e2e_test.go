package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/agent"
)

// TestNodeDrainRBAC: the role the cluster's servers install so that a
// node drains itself (agent.NodeDrainManifest), on a real API server
// with k3s's authorization (Node, RBAC) and NodeRestriction admission,
// with two nodes' kubelet identities:
//   - a node drains itself with `kubectl drain` as the agent runs it: the
//     node cordoned, its pod evicted, the other node's pod left;
//   - it may not evict the other node's pod, nor cordon or drain the other
//     node: the role grants evictions, and the API server confines a
//     node's to its own pods.
func TestNodeDrainRBAC(t *testing.T) {
	nodeTok := map[string]string{"edge-a": randomHex(t), "edge-b": randomHex(t)}
	var lines []string
	for n, tok := range nodeTok {
		lines = append(lines, fmt.Sprintf(`%s,system:node:%s,%s,"system:nodes,system:authenticated"`, tok, n, n))
	}
	k := startKubeWith(t, kubeSetup{tokens: lines, authz: "Node,RBAC", args: []string{"--enable-admission-plugins=NodeRestriction"}})
	kc := func(node string) string {
		p := filepath.Join(k.dir, node+".kubeconfig")
		conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: %s}}]
current-context: c
`, k.url, k.caFile, node, nodeTok[node], node)
		if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := kc("edge-a"), kc("edge-b")

	k.apply(t, agent.NodeDrainManifest())
	// The pods' controller (kubectl drain leaves pods without one, unless
	// forced): a ReplicaSet, which no controller manager runs here.
	k.apply(t, `apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: default}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: app, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: app, image: registry.invalid/app:1}]}
`)
	uid := k.must(t, k.adminKC, "get", "replicaset", "app", "-n", "default", "-o", "jsonpath={.metadata.uid}")
	var objs strings.Builder
	for _, n := range []string{"edge-a", "edge-b"} {
		// No kubelet runs here: a pod with no grace period goes at once
		// when evicted.
		fmt.Fprintf(&objs, `---
apiVersion: v1
kind: Node
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Pod
metadata:
  name: app-on-%[1]s
  namespace: default
  labels: {app: app}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: app, uid: %[2]q, controller: true}]
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 0
  automountServiceAccountToken: false
  containers: [{name: app, image: registry.invalid/app:1}]
`, n, uid)
	}
	k.apply(t, objs.String())

	// edge-a may not touch edge-b's pod or node.
	ev := filepath.Join(k.dir, "eviction.json")
	if err := os.WriteFile(ev, []byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"app-on-edge-b","namespace":"default"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// NodeRestriction reads the pod from the API server's informer cache:
	// until the new pod is there it answers "not found" (which a drain
	// would take for the pod gone), so this waits for it — and so for
	// edge-b's drain below.
	var errOut string
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, errOut, err = k.run(t, a, "create", "--raw", "/api/v1/namespaces/default/pods/app-on-edge-b/eviction", "-f", ev)
		if err == nil || !strings.Contains(errOut, "not found") || time.Now().After(deadline) {
			break
		}
	}
	if err == nil || !strings.Contains(errOut, "can only evict pods with spec.nodeName set to itself") {
		t.Errorf("edge-a evicting edge-b's pod: err %v, %s; want it refused by NodeRestriction", err, errOut)
	}
	if _, errOut, err = k.run(t, a, "cordon", "edge-b"); err == nil {
		t.Errorf("edge-a cordoning edge-b: allowed; want refused (%s)", errOut)
	}
	if _, errOut, err = k.run(t, a, "drain", "edge-b", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s"); err == nil {
		t.Errorf("edge-a draining edge-b: allowed; want refused (%s)", errOut)
	}

	// edge-b drains itself as the agent does (agent.K3s.drain's flags).
	k.must(t, b, "drain", "edge-b", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
	if out := k.must(t, k.adminKC, "get", "pods", "-n", "default", "-o", "name"); strings.Contains(out, "app-on-edge-b") || !strings.Contains(out, "app-on-edge-a") {
		t.Errorf("pods after edge-b's drain: %q; want edge-a's alone", out)
	}
	if out := k.must(t, k.adminKC, "get", "node", "edge-b", "-o", "jsonpath={.spec.unschedulable}"); out != "true" {
		t.Errorf("edge-b after its drain: unschedulable %q", out)
	}
	if out := k.must(t, k.adminKC, "get", "node", "edge-a", "-o", "jsonpath={.spec.unschedulable}"); out == "true" {
		t.Error("edge-a cordoned by edge-b's drain")
	}
}
