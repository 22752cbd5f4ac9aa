package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// The Day-0 flow end to end: the real server through Main (API and agent
// listeners on loopback) and simulated nodes running the real agent code
// (agent.Provisioner through agent/sim) over HTTPS with the server's CA.

var agentsRE = regexp.MustCompile(`eim: serving agents on (https://\S+)`)

// day0Server is a server started through Main for the Day-0 tests.
type day0Server struct {
	t        *testing.T
	dataDir  string
	bootDir  string
	extra    []string
	api      string // http://127.0.0.1:PORT
	agentURL string // https://127.0.0.1:PORT
	stop     func()
	admin    *client.Client
	hc       *http.Client // for the admin client; idle connections closed at cleanup
}

// startDay0 starts a server on fresh :0 ports with a boot artifacts
// directory holding a tiny OS image.
func startDay0(t *testing.T, extra ...string) *day0Server {
	t.Helper()
	base := t.TempDir()
	s := &day0Server{t: t, dataDir: filepath.Join(base, "data"), bootDir: filepath.Join(base, "boot"), extra: extra}
	if err := os.MkdirAll(s.bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.bootDir, "os.img"), []byte("a tiny disk image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start("127.0.0.1:0", "127.0.0.1:0")
	return s
}

// start runs Main with the given listen addresses and waits until both
// listeners are up.
func (s *day0Server) start(apiAddr, agentAddr string) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	args := append([]string{"server", "--data-dir", s.dataDir, "--http-addr", apiAddr, "--agent-addr", agentAddr,
		"--boot-artifacts", s.bootDir, "--log-level", "warn", "--rate-limit", "0"}, s.extra...)
	go func() { done <- Main(ctx, args, &out, &errOut) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server exited with %v; stderr:\n%s", err, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("server did not stop within 30 s after cancel")
			}
		})
	}
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		api, ag := servingRE.FindStringSubmatch(out.String()), agentsRE.FindStringSubmatch(out.String())
		if api != nil && ag != nil {
			s.api, s.agentURL = api[1], ag[1]
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("server exited before serving: %v; stderr:\n%s", err, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not print its addresses within 30 s; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(s.dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.hc == nil {
		s.hc = &http.Client{Transport: &http.Transport{}}
		t.Cleanup(s.hc.CloseIdleConnections)
	}
	s.admin = client.New(s.api, strings.TrimSpace(string(tok)), s.hc)
}

// restart stops the server in the middle of whatever the nodes are doing
// and starts it again on the same data directory and ports. The stop is
// graceful (Main's context is cancelled: in-flight calls drain, batches
// commit); kill_e2e_test.go kills a server process with SIGKILL instead.
func (s *day0Server) restart() {
	s.t.Helper()
	s.stop()
	s.hc.CloseIdleConnections()
	s.start(hostPort(s.t, s.api), hostPort(s.t, s.agentURL))
}

func hostPort(t *testing.T, u string) string {
	t.Helper()
	i := strings.Index(u, "://")
	hp := strings.TrimSuffix(u[i+3:], "/")
	if _, _, err := net.SplitHostPort(hp); err != nil {
		t.Fatalf("address of %s: %v", u, err)
	}
	return hp
}

// ca is the server's CA certificate, as the simulator reads it.
func (s *day0Server) ca(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dataDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// createOS creates an OS whose image is the server's boot artifact.
func (s *day0Server) createOS(t *testing.T, project string) string {
	t.Helper()
	img, err := os.ReadFile(filepath.Join(s.bootDir, "os.img"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(img)
	var o eim.OS
	err = s.admin.Create(context.Background(), project, eim.KindOS, map[string]string{
		"name": "tiny-os", "profileName": "tiny-os", "imageUrl": s.api + "/boot/artifacts/os.img", "sha256": hex.EncodeToString(sum[:]),
	}, &o)
	if err != nil {
		t.Fatalf("create OS: %v", err)
	}
	return o.ResourceID
}

// fleet runs the simulator over ids until every node is done or the
// timeout passes.
func (s *day0Server) fleet(t *testing.T, ctx context.Context, ids []sim.Identity, o sim.Options) *sim.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	o.URL, o.CA, o.Identities = s.agentURL, s.ca(t), ids
	if o.ActionTime == 0 {
		o.ActionTime = 5 * time.Millisecond
	}
	o.Backoff = agent.Backoff{Min: 200 * time.Millisecond, Max: 2 * time.Second}
	o.Connections = 2
	rep, err := sim.Run(ctx, o)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	return rep
}

// checkRunning checks through the API that every node's host and instance
// ended as a provisioned node does.
func (s *day0Server) checkRunning(t *testing.T, project string, hostIDs []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range hostIDs {
		var h eim.Host
		if err := s.admin.Get(ctx, project, eim.KindHost, id, &h); err != nil {
			t.Fatalf("host %s: %v", id, err)
		}
		if h.CurrentState != eim.HostStateOnboarded || h.OnboardingStatus != "Onboarded" || h.HostStatus != "Running" || h.Instance == nil {
			t.Errorf("host %s: got current %s, onboarding %q, status %q, instance %v; want ONBOARDED, Onboarded, Running with an instance",
				id, h.CurrentState, h.OnboardingStatus, h.HostStatus, h.Instance != nil)
			continue
		}
		in := h.Instance
		if in.CurrentState != eim.InstanceStateRunning || in.ProvisioningStatus != "Provisioned" || in.ProvisioningStatusIndicator != eim.StatusIdle {
			t.Errorf("instance of host %s: got %s, %q %s; want RUNNING, Provisioned IDLE", id, in.CurrentState, in.ProvisioningStatus, in.ProvisioningStatusIndicator)
		}
	}
}

// wantReport checks a fleet report's final counts.
func wantReport(t *testing.T, rep *sim.Report, running, failed int) {
	t.Helper()
	if rep.Final[sim.OutcomeRunning] != running || rep.Final[sim.OutcomeFailed] != failed || rep.Final[sim.OutcomeStuck] != 0 || rep.Unexpected != 0 {
		t.Fatalf("fleet: got final %v (unexpected %d, errors %v), want %d running, %d failed", rep.Final, rep.Unexpected, rep.Errors, running, failed)
	}
}

func register(t *testing.T, s *day0Server, project, osID string, ids []sim.Identity) []string {
	t.Helper()
	hostIDs, err := sim.Registration{Client: s.admin, Project: project, OSID: osID}.Register(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return hostIDs
}

func TestDay0SQLite(t *testing.T) { testDay0(t, startDay0(t)) }

func TestDay0Postgres(t *testing.T) {
	testDay0(t, startDay0(t, "--database", freshPostgres(t)))
}

func testDay0(t *testing.T, s *day0Server) {
	ctx := context.Background()
	osID := s.createOS(t, eim.DefaultProject)

	// The flows run in parallel against one server; the restart comes after.
	t.Run("flows", func(t *testing.T) {
		t.Run("pre-registered with an instance", func(t *testing.T) {
			t.Parallel()
			ids := sim.Generate(12, 1)
			hostIDs := register(t, s, eim.DefaultProject, osID, ids)
			rep := s.fleet(t, ctx, ids, sim.Options{RebootShare: 0.3, Seed: 1})
			wantReport(t, rep, 12, 0)
			if rep.Injected["reboot"] == 0 {
				t.Errorf("no node rebooted mid-workflow (injected %v); the seed should give some", rep.Injected)
			}
			s.checkRunning(t, eim.DefaultProject, hostIDs)
		})

		t.Run("injected failures end in ERROR", func(t *testing.T) {
			t.Parallel()
			ids := sim.Generate(3, 2)
			hostIDs := register(t, s, eim.DefaultProject, osID, ids)
			rep := s.fleet(t, ctx, ids, sim.Options{FailShare: 1, Seed: 2})
			wantReport(t, rep, 0, 3)
			for _, id := range hostIDs {
				var h eim.Host
				if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, id, &h); err != nil {
					t.Fatal(err)
				}
				if h.Instance == nil || !strings.HasPrefix(h.Instance.ProvisioningStatus, "Provisioning Failed: 2/") ||
					!strings.Contains(h.Instance.ProvisioningStatus, "simulated failure of stream-image") || h.Instance.ProvisioningStatusIndicator != eim.StatusError {
					t.Errorf("host %s instance: got %+v, want Provisioning Failed at action 2 ERROR", id, h.Instance)
				}
			}
		})

		t.Run("non-zero-touch waits for its instance", func(t *testing.T) {
			t.Parallel()
			ids := sim.Generate(4, 3)
			hostIDs := register(t, s, eim.DefaultProject, "", ids)
			done := make(chan *sim.Report, 1)
			go func() { done <- s.fleet(t, ctx, ids, sim.Options{Seed: 3}) }()
			waitFor(t, "hosts onboarded without an instance", func() bool {
				for _, id := range hostIDs {
					var h eim.Host
					if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, id, &h); err != nil || h.CurrentState != eim.HostStateOnboarded {
						return false
					}
				}
				return true
			})
			for i, id := range hostIDs {
				in := map[string]string{"kind": string(eim.InstanceKindMetal), "name": ids[i].Hostname, "hostID": id, "osID": osID}
				if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindInstance, in, nil); err != nil {
					t.Fatal(err)
				}
			}
			wantReport(t, <-done, 4, 0)
			s.checkRunning(t, eim.DefaultProject, hostIDs)
		})

		t.Run("the Secure Boot state shows on the host", func(t *testing.T) {
			t.Parallel()
			id := sim.Generate(1, 13)[0]
			hostID := register(t, s, eim.DefaultProject, "", []sim.Identity{id})[0]
			// A micro-OS that booted with Secure Boot enforced calls home.
			ob := onboardingv1connect.NewOnboardingServiceClient(s.agentClient(t), s.agentURL)
			if _, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: id.UUID, Serial: id.Serial,
				SecureBoot: provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED})); err != nil {
				t.Fatal(err)
			}
			var h eim.Host
			if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, hostID, &h); err != nil {
				t.Fatal(err)
			}
			if h.SecureBootState != eim.SecureBootStateEnabled || h.SecureBootStateTimestamp == 0 {
				t.Errorf("API: secureBootState %q at %d, want ENABLED with a time", h.SecureBootState, h.SecureBootStateTimestamp)
			}
			cli := cliRunner{t: t, url: s.api, tokenFile: writeToken(t, strings.TrimSpace(string(mustRead(t, filepath.Join(s.dataDir, adminTokenFile)))))}
			table := cli.must("host", "list", "--filter", "secureBootState=SECURE_BOOT_STATE_ENABLED")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], "SECURE BOOT") || !strings.Contains(lines[1], hostID) || !strings.HasSuffix(strings.TrimSpace(lines[1]), "ENABLED") {
				t.Errorf("eim host list --filter secureBootState=…ENABLED: got\n%s\nwant the header with SECURE BOOT and the host, ENABLED", table)
			}
			if got := cli.must("host", "get", hostID); !regexp.MustCompile(`(?m)^secureBootState:\s+SECURE_BOOT_STATE_ENABLED$`).MatchString(got) {
				t.Errorf("eim host get: no secureBootState line in\n%s", got)
			}
		})

		t.Run("unknown device is refused", func(t *testing.T) {
			t.Parallel()
			id := sim.Generate(1, 5)[0]
			ob := onboardingv1connect.NewOnboardingServiceClient(s.agentClient(t), s.agentURL)
			_, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: id.UUID, Serial: id.Serial}))
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("discover of an unknown device: got %v, want NotFound", err)
			}
			_, err = ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: id.UUID, Serial: id.Serial, EnrollmentToken: "not-the-token"}))
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("discover with a wrong enrollment token: got %v, want PermissionDenied", err)
			}
		})

		t.Run("zero-touch by the project's default OS", func(t *testing.T) {
			t.Parallel()
			if _, err := s.admin.CreateProject(ctx, "ztp"); err != nil {
				t.Fatal(err)
			}
			ztpOS := s.createOS(t, "ztp")
			if _, err := s.admin.UpdateProjectSettings(ctx, "ztp", client.SettingsChange{DefaultOSID: &ztpOS}); err != nil {
				t.Fatal(err)
			}
			ids := sim.Generate(6, 4)
			hostIDs := register(t, s, "ztp", "", ids)
			wantReport(t, s.fleet(t, ctx, ids, sim.Options{RebootShare: 0.5, Seed: 4}), 6, 0)
			s.checkRunning(t, "ztp", hostIDs)
		})

		t.Run("unknown device accepted with the enrollment token and an ANY rule", func(t *testing.T) {
			t.Parallel()
			if _, err := s.admin.CreateProject(ctx, "enroll"); err != nil {
				t.Fatal(err)
			}
			enrollOS := s.createOS(t, "enroll")
			yes := true
			p, err := s.admin.UpdateProjectSettings(ctx, "enroll", client.SettingsChange{DefaultOSID: &enrollOS, EnrollmentToken: "new", AutoOnboardEnrolled: &yes})
			if err != nil {
				t.Fatal(err)
			}
			if p.EnrollmentToken == "" {
				t.Fatal("no enrollment token in the answer")
			}
			// Every device with the token is let in (the token's behaviour
			// before the enrollment lobby): a rule of kind ANY.
			if _, err := s.admin.CreateEnrollmentRule(ctx, "enroll", client.RuleInput{Name: "any", Kind: "ANY"}); err != nil {
				t.Fatal(err)
			}
			ids := sim.Generate(3, 6)
			wantReport(t, s.fleet(t, ctx, ids, sim.Options{EnrollToken: p.EnrollmentToken, Seed: 6}), 3, 0)
			page, err := s.admin.List(ctx, "enroll", eim.KindHost, client.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var hostIDs []string
			for _, raw := range page.Items {
				var h eim.Host
				if err := json.Unmarshal(raw, &h); err != nil {
					t.Fatal(err)
				}
				hostIDs = append(hostIDs, h.ResourceID)
			}
			if len(hostIDs) != 3 {
				t.Fatalf("enrolled hosts: got %d, want 3", len(hostIDs))
			}
			s.checkRunning(t, "enroll", hostIDs)
		})

		t.Run("revoked node", func(t *testing.T) {
			t.Parallel()
			id := sim.Generate(1, 7)[0]
			hostIDs := register(t, s, eim.DefaultProject, osID, []sim.Identity{id})
			hc := s.agentClient(t)
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			node := &agent.Node{Client: hc, Config: s.provision(t, hc, id)}
			if _, err := node.ReportIn(pctx); err != nil {
				t.Fatalf("report in: %v", err)
			}
			s.checkRunning(t, eim.DefaultProject, hostIDs)
			if err := s.admin.InvalidateHost(ctx, eim.DefaultProject, hostIDs[0], "stolen"); err != nil {
				t.Fatal(err)
			}
			_, err := node.ReportIn(pctx)
			if !errors.Is(err, agent.ErrCredentialsRevoked) && connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("report in after invalidate: got %v, want credentials revoked (401)", err)
			}
			// A fresh token is refused too.
			fresh := &agent.Node{Client: hc, Config: node.Config}
			if _, err := fresh.ReportIn(pctx); !errors.Is(err, agent.ErrCredentialsRevoked) {
				t.Fatalf("report in with a new token after invalidate: got %v, want %v", err, agent.ErrCredentialsRevoked)
			}
		})

		t.Run("deleted node", func(t *testing.T) {
			t.Parallel()
			id := sim.Generate(1, 9)[0]
			hostIDs := register(t, s, eim.DefaultProject, osID, []sim.Identity{id})
			hc := s.agentClient(t)
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			node := &agent.Node{Client: hc, Config: s.provision(t, hc, id)}
			if _, err := node.ReportIn(pctx); err != nil {
				t.Fatalf("report in: %v", err)
			}
			var h eim.Host
			if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, hostIDs[0], &h); err != nil || h.Instance == nil {
				t.Fatalf("host %s: %v, instance %v", hostIDs[0], err, h.Instance)
			}
			// Through the REST API, as a user deletes a machine: the host
			// alone; its instance goes with it.
			if err := s.admin.Delete(ctx, eim.DefaultProject, eim.KindHost, hostIDs[0]); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the instance removed", func() bool {
				var in eim.Instance
				return eim.ErrorCode(s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, h.Instance.ResourceID, &in)) == eim.ENOTFOUND
			})
			// Revoked as soon as the delete is asked for, before the row goes.
			_, err := node.ReportIn(pctx)
			if !errors.Is(err, agent.ErrCredentialsRevoked) && connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("report in after delete: got %v, want credentials revoked (401)", err)
			}
			waitFor(t, "the host removed", func() bool {
				var gone eim.Host
				return eim.ErrorCode(s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, hostIDs[0], &gone)) == eim.ENOTFOUND
			})
			fresh := &agent.Node{Client: hc, Config: node.Config}
			if _, err := fresh.ReportIn(pctx); !errors.Is(err, agent.ErrCredentialsRevoked) {
				t.Fatalf("report in with a new token after the host is gone: got %v, want %v", err, agent.ErrCredentialsRevoked)
			}
		})
	})

	t.Run("server graceful restart mid-flow", func(t *testing.T) {
		ids := sim.Generate(16, 8)
		hostIDs := register(t, s, eim.DefaultProject, osID, ids)
		done := make(chan *sim.Report, 1)
		go func() {
			done <- s.fleet(t, ctx, ids, sim.Options{ActionTime: 300 * time.Millisecond, RebootShare: 0.25, Seed: 8})
		}()
		waitFor(t, "some nodes in their workflow", func() bool {
			n := 0
			for _, id := range hostIDs {
				var h eim.Host
				if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, id, &h); err == nil && h.Instance != nil &&
					strings.HasPrefix(h.Instance.ProvisioningStatus, "Provisioning In Progress") {
					n++
				}
			}
			return n >= 4
		})
		s.restart()
		wantReport(t, <-done, 16, 0)
		s.checkRunning(t, eim.DefaultProject, hostIDs)
		for _, id := range hostIDs {
			var h eim.Host
			if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, id, &h); err != nil {
				t.Fatal(err)
			}
			var log struct {
				Attempt int    `json:"attempt"`
				State   string `json:"state"`
			}
			path := fmt.Sprintf("/v1/projects/%s/compute/instances/%s/provisioning_log", eim.DefaultProject, h.Instance.ResourceID)
			if err := s.admin.Do(ctx, http.MethodGet, path, nil, &log); err != nil {
				t.Fatal(err)
			}
			if log.Attempt != 1 {
				t.Errorf("host %s: workflow attempt %d (%s), want 1: nothing is provisioned twice", id, log.Attempt, log.State)
			}
		}
	})
}

// agentClient is an HTTPS client trusting the server's CA, closed at cleanup.
func (s *day0Server) agentClient(t *testing.T) *http.Client {
	t.Helper()
	hc, err := agent.Dial(s.agentURL, s.ca(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// waitFor polls cond until it holds, failing the test after 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
