package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// TestWebhooksAndAudit end to end: `eim server` and simulated nodes
// (eim-agent simulate) onboard and provision hosts; a webhook created with
// the CLI receives host.onboarded and instance.running for each, signed
// as documented; `eim audit list` shows who did what (the admin through
// the API, the nodes, the modules), and -f follows it.
func TestWebhooksAndAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds eim-agent")
	}
	bin := buildAgent(t)
	t.Run("sqlite", func(t *testing.T) { testWebhooksAndAudit(t, bin, startDay0(t)) })
	t.Run("postgres", func(t *testing.T) {
		testWebhooksAndAudit(t, bin, startDay0(t, "--database", freshPostgres(t), "--database-max-conns", "4"))
	})
}

func testWebhooksAndAudit(t *testing.T, bin string, s *day0Server) {
	const project, secret, nodes = "hooks", "e2e-secret-0123456789", 3
	if _, err := s.admin.CreateProject(context.Background(), project); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		events []map[string]any
		bad    []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := eim.VerifySignature(secret, r.Header.Get(eim.SignatureHeader), body, time.Now(), time.Minute); err != nil {
			bad = append(bad, err.Error())
		}
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			bad = append(bad, "body: "+err.Error())
		}
		events = append(events, ev)
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()

	tokenFile := filepath.Join(s.dataDir, adminTokenFile)
	cli := func(ctx context.Context, args ...string) (string, error) {
		var out, errOut syncBuffer
		all := append([]string{"--server", s.api, "--token-file", tokenFile, "--project", project}, args...)
		err := Main(ctx, all, &out, &errOut)
		if err != nil {
			return out.String(), errors.New(err.Error() + ": " + errOut.String())
		}
		return out.String(), nil
	}
	out, err := cli(t.Context(), "-o", "id", "webhook", "create", "--url", recv.URL+"/eim", "--events", "host.onboarded,instance.running", "--secret", secret)
	if err != nil {
		t.Fatal(err)
	}
	hookID := strings.TrimSpace(out)
	if !eim.ValidID(eim.KindWebhook, hookID) {
		t.Fatalf("webhook create -o id: got %q", out)
	}
	if _, err := cli(t.Context(), "webhook", "create", "--url", "http://169.254.169.254/", "--events", "host.onboarded"); err == nil || !strings.Contains(err.Error(), "url") {
		t.Errorf("webhook create with a metadata address: got %v, want an error naming url", err)
	}

	// Follow the audit log while the fleet comes up.
	followCtx, stopFollow := context.WithCancel(context.Background())
	var followed syncBuffer
	followDone := make(chan error, 1)
	go func() {
		followDone <- Main(followCtx, []string{"--server", s.api, "--token-file", tokenFile, "--project", project, "-o", "json", "audit", "list", "-f", "--kind", "inst"}, &followed, io.Discard)
	}()

	osID := s.createOS(t, project)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
		"--nodes", "3", "--seed", "31", "--register", "--api", s.api, "--token-file", tokenFile, "--project", project, "--os", osID,
		"--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s", "--exit-after-day0")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("eim-agent simulate: %v\n%s", err, stderr.String())
	}
	noChildRace(t, "eim-agent simulate", stderr.Bytes())

	deadline := time.Now().Add(30 * time.Second)
	count := func() (onboarded, running map[string]bool) {
		mu.Lock()
		defer mu.Unlock()
		onboarded, running = map[string]bool{}, map[string]bool{}
		for _, ev := range events {
			id, _ := ev["resourceId"].(string)
			switch ev["type"] {
			case eim.EventHostOnboarded:
				onboarded[id] = true
			case eim.EventInstanceRunning:
				running[id] = true
			}
		}
		return onboarded, running
	}
	for {
		on, run := count()
		if len(on) == nodes && len(run) == nodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d hosts onboarded and %d instances running delivered, want %d each; events %v", len(on), len(run), nodes, events)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	if len(bad) > 0 {
		t.Errorf("deliveries with a bad signature or body: %v", bad)
	}
	mu.Unlock()

	// The receiver has every event; the deliverer records a delivery once
	// its answer came back, so the last record may follow a moment later.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err = cli(t.Context(), "webhook", "deliveries", hookID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(out, "DELIVERED") >= 2*nodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eim webhook deliveries: got\n%s\nwant %d delivered", out, 2*nodes)
		}
	}

	// A change through the CLI, and a new secret shown once.
	out, err = cli(t.Context(), "webhook", "update", hookID, "--events", "host.onboarded,instance.running,project.deleted", "--secret", "new")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "project.deleted") || !strings.Contains(out, "secret (shown once): ") {
		t.Errorf("eim webhook update: got\n%s\nwant the new event types and the new secret", out)
	}
	if out, err = cli(t.Context(), "-o", "json", "webhook", "get", hookID); err != nil || strings.Contains(out, "secret") || !strings.Contains(out, "project.deleted") {
		t.Errorf("eim webhook get: got %s, %v; want the change and no secret", out, err)
	}

	// The audit log: the admin registered the hosts through the API, the
	// modules and nodes moved them on.
	out, err = cli(t.Context(), "-o", "json", "audit", "list", "--page-size", "100")
	if err != nil {
		t.Fatal(err)
	}
	principals := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec eim.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit list -o json: line %q: %v", line, err)
		}
		kind, _, _ := strings.Cut(rec.Principal, ":")
		principals[kind]++
	}
	if principals["user"] == 0 || principals["module"] == 0 || principals["node"] == 0 {
		t.Errorf("audit principals: got %v, want users, modules and nodes", principals)
	}
	hostID := ""
	{
		on, _ := count()
		for id := range on {
			hostID = id
		}
	}
	out, err = cli(t.Context(), "audit", "list", "--resource", hostID, "--since", "1h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "→ \"HOST_STATE_ONBOARDED\"") {
		t.Errorf("eim audit list --resource %s: got\n%s\nwant the host's onboarding", hostID, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if !strings.Contains(line, hostID) {
			t.Errorf("eim audit list --resource %s shows another resource: %s", hostID, line)
		}
	}

	// The follower has printed the instances' records as they came: every
	// one the log holds now, each once, in seq order (its cursor skipped
	// none).
	logged, err := s.admin.Audit(t.Context(), project, `kind="inst"`, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	printedSeqs := func() []int64 {
		var out []int64
		for _, line := range strings.Split(strings.TrimSpace(followed.String()), "\n") {
			var r eim.AuditRecord
			if json.Unmarshal([]byte(line), &r) == nil && r.Seq > 0 {
				out = append(out, r.Seq)
			}
		}
		return out
	}
	for time.Now().Before(deadline) && len(printedSeqs()) < len(logged.Records) {
		time.Sleep(50 * time.Millisecond)
	}
	stopFollow()
	var want []int64
	for _, r := range slices.Backward(logged.Records) {
		want = append(want, r.Seq)
	}
	if got := printedSeqs(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("audit list -f printed seqs %v; want first those of the log, oldest first: %v", got, want)
	}
	if err := <-followDone; err != nil {
		t.Errorf("audit list -f: %v", err)
	}
	if n := strings.Count(followed.String(), `"kind":"inst"`); n < nodes {
		t.Errorf("audit list -f printed %d instance records, want at least %d:\n%s", n, nodes, followed.String())
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(followed.String()), "\n") {
		if seen[line] {
			t.Errorf("audit list -f printed a record twice: %s", line)
		}
		seen[line] = true
	}
}
