package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
)

// The agent binary must not link the server's store or its drivers.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/eimhq/eim/sqlstore", "github.com/eimhq/eim/inventory", "github.com/eimhq/eim/httpapi",
			"github.com/eimhq/eim/southbound", "github.com/eimhq/eim/onboarding", "github.com/eimhq/eim/provisioning",
			"modernc.org/sqlite", "github.com/jackc/pgx",
		} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("eim-agent depends on %s", dep)
			}
		}
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage bool
	}{
		{nil, true},
		{[]string{"frobnicate"}, true},
		{[]string{"node", "--nope"}, true},
		{[]string{"node", "extra"}, true},
		{[]string{"node", "--workload-check", "10ms"}, true},
		{[]string{"discover", "--ca", "/does/not/exist", "--url", "https://x"}, true},
		{[]string{"node", "--config", "/does/not/exist"}, false},
		{[]string{"discover", "--cmdline", "/does/not/exist"}, false},
		{[]string{"connect"}, true}, // no --server
		{[]string{"connect", "--server", "https://x", "--cluster", "no-slash"}, true},
		{[]string{"connect", "--server", "https://x", "--upstream", "ftp://x"}, true},
		{[]string{"connect", "--server", "https://x", "--upstream-cert", "c.pem"}, true}, // without its key
		{[]string{"connect", "--server", "https://x", "--ca", "/does/not/exist"}, false},
		{[]string{"connect", "--server", "https://x", "--ca", "sha256:" + strings.Repeat("ab", 32), "--token-file", "/does/not/exist"}, false},
	} {
		err := Main(t.Context(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || errors.As(err, new(*usageError)) != tc.usage {
			t.Errorf("Main(%q) = %v; want an error, usage error %v", tc.args, err, tc.usage)
		}
	}
	var out bytes.Buffer
	if err := Main(t.Context(), []string{"version"}, &out, &out); err != nil || !strings.HasPrefix(out.String(), "v") {
		t.Errorf("version: %q, %v", out.String(), err)
	}
}

// server is a minimal southbound server with real Connect handlers.
type server struct {
	onboardingv1connect.UnimplementedOnboardingServiceHandler
	provisioningv1connect.UnimplementedProvisioningServiceHandler
	hostv1connect.UnimplementedHostServiceHandler

	url      string
	workflow *provisioningv1.Workflow

	mu       sync.Mutex
	got      *onboardingv1.DiscoverRequest
	reports  []string
	reportIn chan *hostv1.ReportInRequest
}

func (s *server) Discover(_ context.Context, req *connect.Request[onboardingv1.DiscoverRequest]) (*connect.Response[onboardingv1.DiscoverResponse], error) {
	s.mu.Lock()
	s.got = req.Msg
	s.mu.Unlock()
	return connect.NewResponse(&onboardingv1.DiscoverResponse{
		Status: onboardingv1.DiscoverResponse_STATUS_ONBOARDED, HostId: "host-1", Project: "p",
		ClientId: "edgenode-host-1", ClientSecret: "sec", TokenUrl: s.url + "/oauth2/token",
	}), nil
}

func (s *server) GetWorkflow(_ context.Context, req *connect.Request[provisioningv1.GetWorkflowRequest]) (*connect.Response[provisioningv1.GetWorkflowResponse], error) {
	if req.Header().Get("Authorization") != "Bearer tok" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no token"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reports) == 0 {
		return connect.NewResponse(&provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_RUN, Workflow: s.workflow}), nil
	}
	return connect.NewResponse(&provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}), nil
}

func (s *server) ReportAction(_ context.Context, req *connect.Request[provisioningv1.ReportActionRequest]) (*connect.Response[provisioningv1.ReportActionResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, fmt.Sprintf("%d:%s:%s", req.Msg.GetIndex(), req.Msg.GetState(), req.Msg.GetMessage()))
	return connect.NewResponse(&provisioningv1.ReportActionResponse{}), nil
}

func (s *server) ReportIn(_ context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	if req.Header().Get("Authorization") != "Bearer tok" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no token"))
	}
	s.reportIn <- req.Msg
	return connect.NewResponse(&hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}), nil
}

// start serves s over TLS and returns the server's CA certificate (the
// httptest certificate is self-signed, so it is its own CA).
func (s *server) start(t *testing.T) (fingerprint, caPEM string) {
	mux := http.NewServeMux()
	mux.Handle(onboardingv1connect.NewOnboardingServiceHandler(s))
	mux.Handle(provisioningv1connect.NewProvisioningServiceHandler(s))
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.HandleFunc("/oauth2/token", func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.PostForm.Get("client_id") != "edgenode-host-1" || r.PostForm.Get("client_secret") != "sec" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"tok","token_type":"Bearer","expires_in":900}`)
	})
	mux.HandleFunc("/os.img", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("an OS image")) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	der := srv.Certificate().Raw
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestDiscoverRunsWorkflow(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.img")
	os.WriteFile(disk, bytes.Repeat([]byte{1}, 4<<20), 0o644)
	imgSum := sha256.Sum256([]byte("an OS image"))
	s := &server{}
	fp, caPEM := s.start(t)
	s.workflow = &provisioningv1.Workflow{Id: "wf", Attempt: 1, Actions: []*provisioningv1.Action{
		{Index: 0, Name: "erase-disk", Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{Device: disk}}},
		{Index: 1, Name: "stream-image", Spec: &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{
			Url: s.url + "/os.img", Sha256: hex.EncodeToString(imgSum[:]), Device: disk, CaCertPem: caPEM}}},
	}}
	dmi := filepath.Join(dir, "sys", "class", "dmi", "id")
	os.MkdirAll(dmi, 0o755)
	os.WriteFile(filepath.Join(dmi, "product_serial"), []byte("SN0001\n"), 0o644)
	cmdline := filepath.Join(dir, "cmdline")
	os.WriteFile(cmdline, []byte("console=ttyS0 eim.url="+s.url+" eim.ca="+fp+" eim.enroll=tok1\n"), 0o644)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := Main(ctx, []string{"discover", "--cmdline", cmdline, "--sys-root", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("discover: %v\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), "host host-1 is provisioned; boot it from its disk\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if s.got.GetSerial() != "SN0001" || s.got.GetEnrollmentToken() != "tok1" {
		t.Errorf("discover request = %v", s.got)
	}
	// Actions that end within the output interval are reported once, at
	// their end (agent.Provisioner.OutputInterval).
	want := "0:ACTION_STATE_SUCCEEDED: 1:ACTION_STATE_SUCCEEDED:"
	if got := strings.Join(s.reports, " "); got != want {
		t.Errorf("reports = %s, want %s", got, want)
	}
	if b, _ := os.ReadFile(disk); string(b) != "an OS image" {
		t.Errorf("disk holds %q", b)
	}
}

func TestNodeReportsIn(t *testing.T) {
	s := &server{reportIn: make(chan *hostv1.ReportInRequest, 1)}
	_, caPEM := s.start(t)
	cfg := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(cfg, fmt.Appendf(nil, `{"url":%q,"caCertPem":%q,"clientId":"edgenode-host-1","clientSecret":"sec","hostId":"host-1","project":"p"}`, s.url, caPEM), 0o600)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() { done <- Main(ctx, []string{"node", "--config", cfg}, &bytes.Buffer{}, &stderr) }()
	select {
	case req := <-s.reportIn:
		if req.GetAgentVersion() == "" {
			t.Errorf("report in = %v", req)
		}
	case err := <-done:
		t.Fatalf("node ended: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("node stopped with %v, want nil", err)
	}
}
