package main

import (
	"bufio"
	"context"
	"encoding/pem"

	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/racecheck"
)

// TestConnectKubernetes: the connect tunnel end to end, with a real
// Kubernetes API server behind the agent (eim-agent connect, the built
// binary) and kubectl in front of the gateway (eim server processes):
// ConfigMaps created, read, listed, watched across several pings and
// deleted through it; who the API server sees (impersonation), a write
// refused by the cluster's own RBAC; an upgraded (SPDY) exec stream
// through the API server; and, on PostgreSQL, the request forward between
// two replicas and the agent's move to the survivor when the replica
// holding its tunnel is killed.
func TestConnectKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver, eim servers and an agent")
	}
	k := startKube(t)
	const ping = time.Second
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	common := []string{"--data-dir", dataDir, "--modules", "api,connect", "--log-level", "info", "--rate-limit", "0",
		"--connect-ping-interval", ping.String(), "--connect-ping-timeout", (2 * ping).String()}
	n := 1
	if os.Getenv("EIM_TEST_POSTGRES_URL") != "" {
		common = append(common, "--database", freshPostgres(t), "--database-max-conns", "4")
		n = 2
	} else {
		t.Log("EIM_TEST_POSTGRES_URL not set: one replica on SQLite, no forward between replicas")
	}
	var mu sync.Mutex
	var reps []*replica
	for i := range n {
		reps = append(reps, &replica{name: fmt.Sprintf("gw%d", i), agent: true, args: common, logFile: filepath.Join(base, fmt.Sprintf("gw%d.log", i))})
	}
	agentLB := newRRProxy(t, func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, r := range reps {
			if r.cmd != nil {
				out = append(out, r.agentAt)
			}
		}
		return out
	})
	var agentLog string
	t.Cleanup(func() {
		mu.Lock()
		for _, r := range reps {
			r.kill()
		}
		mu.Unlock()
		for _, r := range reps {
			if b, _ := os.ReadFile(r.logFile); racecheck.Reported(b) {
				t.Errorf("%s reported a data race", r.name)
			}
		}
		if t.Failed() {
			for _, r := range reps {
				b, _ := os.ReadFile(r.logFile)
				t.Logf("%s output:\n%s", r.name, b)
			}
			b, _ := os.ReadFile(agentLog)
			t.Logf("agent output:\n%s", b)
		}
	})
	for _, r := range reps { // the first makes the signing key, the CA and the admin token
		mu.Lock()
		r.start(t)
		mu.Unlock()
	}
	url := func(r *replica) string { return "http://" + r.http }
	adminTok := filepath.Join(dataDir, adminTokenFile)
	admin := client.New(url(reps[0]), strings.TrimSpace(string(must(os.ReadFile(adminTok)))), nil)
	ctx := context.Background()
	proj, err := admin.CreateProject(ctx, "kube-e2e") // a hyphen in the project's name
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "edge-1"

	// The cluster's side: the agent may impersonate; users' groups are
	// bound to roles: writers write, readers read. (The built-in edit and
	// view are aggregated by the controller manager, which this API server
	// runs without.)
	k.apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: eim-connect-impersonator}
rules: [{apiGroups: [""], resources: [users, groups], verbs: [impersonate]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: eim-connect-impersonator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eim-connect-impersonator}
subjects: [{kind: User, name: %s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: eim-writer}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, update, patch, delete]}
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
- {apiGroups: [""], resources: [pods/exec], verbs: [create, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: eim-reader}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: eim-cluster-writers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eim-writer}
subjects: [{kind: Group, name: "eim:kube-e2e_cl-rw"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: eim-cluster-readers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eim-reader}
subjects: [{kind: Group, name: "eim:kube-e2e_im-rw"}]
`, k.agentUser))

	// The connect token, issued with the CLI into a file.
	tokFile := filepath.Join(base, "connect.token")
	cli := cliRunner{t: t, url: url(reps[0]), tokenFile: adminTok}
	if out := cli.must("connect", "token", cluster, "--project", proj.Name, "--out", tokFile); out != "" {
		t.Errorf("eim connect token printed %q without --print", out)
	}
	secret := strings.TrimSpace(string(must(os.ReadFile(tokFile))))
	agentTok := filepath.Join(base, "upstream.token")
	if err := os.WriteFile(agentTok, []byte(k.agentToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The agent: the built eim-agent, through a load balancer in front of
	// the replicas' agent listeners.
	agentBin := buildTool(t, "github.com/eimhq/eim/cmd/eim-agent", "eim-agent")
	agentLog = filepath.Join(base, "agent.log")
	logf, err := os.Create(agentLog)
	if err != nil {
		t.Fatal(err)
	}
	acmd := exec.Command(agentBin, "connect", "--server", "https://"+agentLB.Addr(), "--ca", filepath.Join(dataDir, "ca.crt"),
		"--cluster", proj.Name+"/"+cluster, "--token-file", tokFile, "--upstream", k.url, "--upstream-ca", k.caFile,
		"--upstream-token-file", agentTok, "--ping-interval", ping.String(), "--ping-timeout", (2 * ping).String())
	acmd.Stdout, acmd.Stderr = logf, logf
	if err := acmd.Start(); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan struct{})
	go func() { _ = acmd.Wait(); logf.Close(); close(agentDone) }()
	t.Cleanup(func() {
		_ = acmd.Process.Kill()
		<-agentDone
		b, _ := os.ReadFile(agentLog)
		if racecheck.Reported(b) {
			t.Errorf("the agent reported a data race")
		}
	})

	status := func(via *replica) (*client.ClusterConnection, error) {
		tok := strings.TrimSpace(string(must(os.ReadFile(adminTok))))
		return client.New(url(via), tok, nil).ClusterConnection(ctx, proj.Name, cluster)
	}
	holder := func(via *replica, not string) *replica {
		t.Helper()
		var st *client.ClusterConnection
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			st, err = status(via)
			if err == nil && st.Connected && st.Replica != not && st.RTTMillis > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster is not connected through a replica (other than %q) within 30 s: %+v, %v", not, st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, r := range reps {
			if strings.HasPrefix(st.Replica, r.name+"-") {
				return r
			}
		}
		t.Fatalf("the tunnel is held by %q, not a replica of this test", st.Replica)
		return nil
	}
	held := holder(reps[0], "")
	st, _ := status(held)
	if !strings.HasPrefix(st.AgentVersion, "v") || st.LastSeen == nil {
		t.Errorf("status: got %+v, want the agent's version and a last ping", st)
	}
	var listed []client.ClusterConnection
	cli.json(&listed, "connect", "status", "--project", proj.Name)
	if len(listed) != 1 || listed[0].Cluster != cluster || !listed[0].Connected || listed[0].TokenExpires == nil {
		t.Errorf("eim connect status -o json: got %+v, want %s connected with its token's expiry", listed, cluster)
	}
	if out := cli.must("connect", "status", "--project", proj.Name); !strings.Contains(out, cluster) || !strings.Contains(out, "true") || !strings.Contains(out, " ms") {
		t.Errorf("eim connect status: got\n%s", out)
	}

	// Users: tokens minted with the servers' key; kubeconfigs from the
	// kubeconfigs endpoint (eim connect kubeconfig), each with a token of
	// its own for the caller.
	iss, err := auth.LoadIssuer(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	userFile := func(name string, roles ...string) string {
		tok, err := iss.Mint(name, roles, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(base, name+".token")
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// kubectl sends its token over TLS only: each replica's HTTP listener
	// is reached through a TLS front, as an ingress would serve it.
	fronts := map[*replica]*httptest.Server{}
	front := func(via *replica) *httptest.Server {
		if f := fronts[via]; f != nil {
			return f
		}
		target := &neturl.URL{Scheme: "http", Host: via.http}
		f := httptest.NewTLSServer(&httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
			},
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0), // a killed replica's cut streams
		})
		t.Cleanup(f.Close)
		fronts[via] = f
		return f
	}
	kubeconfig := func(via *replica, userTok, name string) string {
		t.Helper()
		f := front(via)
		ca := filepath.Join(base, name+"-front.crt")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		kc, err := client.New(f.URL, strings.TrimSpace(string(must(os.ReadFile(userTok)))), f.Client()).Kubeconfig(ctx, proj.Name, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(kc, f.URL+"/kubernetes/"+proj.ID+"-"+cluster) {
			t.Fatalf("the kubeconfig does not point at the gateway's path of the cluster through %s:\n%s", f.URL, kc)
		}
		kc = strings.Replace(kc, "  cluster:\n", fmt.Sprintf("  cluster:\n    certificate-authority: %q\n", ca), 1)
		file := filepath.Join(base, name+".kubeconfig")
		if err := os.WriteFile(file, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	// The CLI writes the same, for the replica it is given.
	cliKC := filepath.Join(base, "cli.kubeconfig")
	cli.must("connect", "kubeconfig", cluster, "--project", proj.Name, "--out", cliKC)
	if fi, err := os.Stat(cliKC); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("eim connect kubeconfig: %v, mode %v; want a 0600 file", err, fi.Mode().Perm())
	}
	if kc := string(must(os.ReadFile(cliKC))); !strings.Contains(kc, url(reps[0])+"/kubernetes/"+proj.ID+"-"+cluster) {
		t.Errorf("eim connect kubeconfig: no server %s/kubernetes/%s-%s in\n%s", url(reps[0]), proj.ID, cluster, kc)
	}
	writerTok := userFile("writer", proj.Name+"_cl-rw")
	readerTok := userFile("reader", proj.Name+"_im-rw") // may write as far as EIM is concerned; the cluster's RBAC says view
	writer := kubeconfig(held, writerTok, "writer")
	reader := kubeconfig(held, readerTok, "reader")

	// Who the cluster sees.
	if who := k.must(t, writer, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); !strings.HasPrefix(who, "eim:writer ") || !strings.Contains(who, "eim:kube-e2e_cl-rw") || strings.Contains(who, "system:masters") {
		t.Errorf("kubectl auth whoami through the gateway: %q, want eim:writer in eim:kube-e2e_cl-rw", who)
	}

	// ConfigMaps: create, get, list, watch (outliving several pings),
	// delete.
	k.must(t, writer, "create", "configmap", "cm1", "-n", "default", "--from-literal=a=1")
	if got := k.must(t, writer, "get", "configmap", "cm1", "-n", "default", "-o", "jsonpath={.data.a}"); got != "1" {
		t.Errorf("get cm1: data.a %q, want 1", got)
	}
	wctx, wcancel := context.WithCancel(ctx)
	watch := exec.CommandContext(wctx, k.kubectl, "--kubeconfig", writer, "get", "configmaps", "-n", "default", "--watch", "-o", "name", "--request-timeout=0")
	wout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watch.Stderr = io.Discard
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(wout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() { wcancel(); _ = watch.Wait() }()
	waitLine := func(want string, within time.Duration) {
		t.Helper()
		timeout := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the watch ended before %q", want)
				}
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("the watch did not show %q within %v", want, within)
			}
		}
	}
	waitLine("configmap/cm1", 20*time.Second) // the watch's initial list
	time.Sleep(4 * ping)                      // the watch stays open across several pings of the tunnel
	k.must(t, writer, "create", "configmap", "cm2", "-n", "default", "--from-literal=b=2")
	waitLine("configmap/cm2", 20*time.Second)
	if got := k.must(t, writer, "get", "configmaps", "-n", "default", "-o", "name"); !strings.Contains(got, "configmap/cm1") || !strings.Contains(got, "configmap/cm2") {
		t.Errorf("list: %q, want cm1 and cm2", got)
	}
	k.must(t, writer, "delete", "configmap", "cm1", "-n", "default")
	if _, errOut, err := k.run(t, writer, "get", "configmap", "cm1", "-n", "default"); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Errorf("get cm1 after its delete: %v %s, want NotFound", err, errOut)
	}

	// The reader: reads; its write is refused by the cluster itself.
	k.must(t, reader, "get", "configmap", "cm2", "-n", "default")
	_, errOut, err := k.run(t, reader, "create", "configmap", "nope", "-n", "default")
	if err == nil || !strings.Contains(errOut, `User "eim:reader" cannot create resource "configmaps"`) {
		t.Errorf("the reader's create: %v %s, want the cluster's RBAC refusal of eim:reader", err, errOut)
	}

	// An upgrade through the API server: exec into a pod on a node whose
	// "kubelet" is this test's server, which takes the upgrade and echoes.
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/exec/default/p/c") || r.Header.Get("Upgrade") == "" {
			http.Error(w, "want an exec upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n", r.Header.Get("Upgrade"))
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	}))
	defer kubelet.Close()
	kport := kubelet.Listener.Addr().(*net.TCPAddr).Port
	k.apply(t, `apiVersion: v1
kind: Node
metadata: {name: fake-node}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: default}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  nodeName: fake-node
  automountServiceAccountToken: false
  containers: [{name: c, image: example.invalid/none}]
`)
	k.must(t, k.adminKC, "patch", "node", "fake-node", "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":%d}}}}`, kport))
	upgrade(t, held, proj.Name+"-"+cluster, strings.TrimSpace(string(must(os.ReadFile(writerTok)))))

	if n < 2 {
		checkNoSecret(t, secret, agentLog, reps)
		return
	}
	// The other replica forwards to the holder.
	var other *replica
	for _, r := range reps {
		if r != held {
			other = r
		}
	}
	viaOther := kubeconfig(other, writerTok, "writer-other")
	if got := k.must(t, viaOther, "get", "configmap", "cm2", "-n", "default", "-o", "jsonpath={.data.b}"); got != "2" {
		t.Errorf("get cm2 through the replica without the tunnel: %q, want 2", got)
	}
	upgrade(t, other, proj.ID+"-"+cluster, strings.TrimSpace(string(must(os.ReadFile(writerTok)))))

	// Kill the holder: the agent reconnects through the load balancer to
	// the survivor, which then serves the cluster itself.
	mu.Lock()
	held.kill()
	mu.Unlock()
	killed := time.Now()
	survivor := holder(other, held.name+"-1")
	t.Logf("the agent's tunnel moved to %s %v after %s was killed", survivor.name, time.Since(killed).Round(10*time.Millisecond), held.name)
	if got := k.must(t, viaOther, "get", "configmap", "cm2", "-n", "default", "-o", "jsonpath={.data.b}"); got != "2" {
		t.Errorf("get cm2 after the failover: %q, want 2", got)
	}
	checkNoSecret(t, secret, agentLog, reps)
}

// upgrade sends an exec upgrade (SPDY) for pod p through the gateway at
// via and checks that bytes come back through it.
func upgrade(t *testing.T, via *replica, target, token string) {
	t.Helper()
	conn, err := net.Dial("tcp", via.http)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /kubernetes/%s/api/v1/namespaces/default/pods/p/exec?container=c&command=sh&stdin=true&stdout=true HTTP/1.1\r\n"+
		"Host: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n",
		target, via.http, token)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("exec upgrade via %s: %v", via.name, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		t.Fatalf("exec upgrade via %s: %s %s", via.name, resp.Status, b)
	}
	for i := range 3 {
		msg := fmt.Sprintf("stdin %d\n", i)
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("exec stream via %s: got %q, %v; want %q", via.name, got, err, msg)
		}
	}
}

// checkNoSecret: the connect token's secret is in no log.
func checkNoSecret(t *testing.T, token, agentLog string, reps []*replica) {
	t.Helper()
	_, secret, _ := strings.Cut(token, ".")
	if len(secret) < 20 {
		t.Fatalf("connect token %q has no secret part", token)
	}
	files := []string{agentLog}
	for _, r := range reps {
		files = append(files, r.logFile)
	}
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), secret) {
			t.Errorf("%s holds the connect token's secret", filepath.Base(f))
		}
	}
}
