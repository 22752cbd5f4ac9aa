package agent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
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

// testCA is a CA and a server certificate for 127.0.0.1 signed by it.
type testCA struct {
	cert        *x509.Certificate
	pem         string
	fingerprint string
	serverCert  tls.Certificate
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(caDER)
	return &testCA{
		cert:        caCert,
		pem:         string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		fingerprint: hex.EncodeToString(sum[:]),
		// The chain carries the CA, as the server's does: a node that
		// knows only the fingerprint learns the CA from it.
		serverCert: tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key},
	}
}

// startTLS serves h over HTTPS (HTTP/2) with the CA's server certificate.
func (ca *testCA) startTLS(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// southbound is a scripted southbound server: real Connect handlers and a
// token endpoint; each hook decides the n-th answer (n from 1).
type southbound struct {
	onboardingv1connect.UnimplementedOnboardingServiceHandler
	provisioningv1connect.UnimplementedProvisioningServiceHandler
	hostv1connect.UnimplementedHostServiceHandler

	discover func(n int, req *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error)
	token    func(n int, id, secret string) (status int, body string)
	// tokenRetryAfter, when set, is the Retry-After of the n-th token
	// answer ("" none).
	tokenRetryAfter func(n int) string
	getWorkflow     func(n int) (*provisioningv1.GetWorkflowResponse, error)
	report          func(req *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error)
	reportIn        func(n int) (*hostv1.ReportInResponse, error)
	// escrow serves EscrowRecoveryKey; without it the call is
	// Unimplemented (a server that predates it).
	escrow func(n int, req *provisioningv1.EscrowRecoveryKeyRequest) error
	// heartbeat and hardware serve Heartbeat and ReportHardware; without
	// them the calls are Unimplemented (a server that predates them).
	heartbeat func(n int, req *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error)
	hardware  func(n int, req *hostv1.ReportHardwareRequest) (*hostv1.ReportHardwareResponse, error)

	// batched serves ReportActions; without it the call is Unimplemented
	// (a server that predates it).
	batched bool

	mu      sync.Mutex
	counts  map[string]int
	issued  map[string]bool // valid tokens
	reports []*provisioningv1.ReportActionRequest
	batches []int // the number of reports of each ReportActions call
	asked   []*provisioningv1.GetWorkflowRequest
}

func (s *southbound) workflowRequests() []*provisioningv1.GetWorkflowRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*provisioningv1.GetWorkflowRequest(nil), s.asked...)
}

func (s *southbound) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[name]++
	return s.counts[name]
}

func (s *southbound) calls(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[name]
}

func (s *southbound) gotReports() []*provisioningv1.ReportActionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*provisioningv1.ReportActionRequest(nil), s.reports...)
}

// revokeTokens makes every issued token fail with Unauthenticated.
func (s *southbound) revokeTokens() {
	s.mu.Lock()
	s.issued = nil
	s.mu.Unlock()
}

func (s *southbound) authorize(h http.Header) error {
	tok := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.issued[tok] {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("bad token"))
	}
	return nil
}

func (s *southbound) Discover(_ context.Context, req *connect.Request[onboardingv1.DiscoverRequest]) (*connect.Response[onboardingv1.DiscoverResponse], error) {
	resp, err := s.discover(s.count("discover"), req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) GetWorkflow(_ context.Context, req *connect.Request[provisioningv1.GetWorkflowRequest]) (*connect.Response[provisioningv1.GetWorkflowResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.asked = append(s.asked, req.Msg)
	s.mu.Unlock()
	resp, err := s.getWorkflow(s.count("getWorkflow"))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) EscrowRecoveryKey(_ context.Context, req *connect.Request[provisioningv1.EscrowRecoveryKeyRequest]) (*connect.Response[provisioningv1.EscrowRecoveryKeyResponse], error) {
	if s.escrow == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no EscrowRecoveryKey here"))
	}
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	if err := s.escrow(s.count("escrow"), req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&provisioningv1.EscrowRecoveryKeyResponse{}), nil
}

func (s *southbound) ReportAction(_ context.Context, req *connect.Request[provisioningv1.ReportActionRequest]) (*connect.Response[provisioningv1.ReportActionResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.count("report")
	var resp *provisioningv1.ReportActionResponse
	var err error
	if s.report != nil {
		resp, err = s.report(req.Msg)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.reports = append(s.reports, req.Msg)
	s.mu.Unlock()
	if resp == nil {
		resp = &provisioningv1.ReportActionResponse{}
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) ReportActions(_ context.Context, req *connect.Request[provisioningv1.ReportActionsRequest]) (*connect.Response[provisioningv1.ReportActionsResponse], error) {
	if !s.batched {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no ReportActions here"))
	}
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.count("reportActions")
	s.mu.Lock()
	s.batches = append(s.batches, len(req.Msg.GetReports()))
	s.reports = append(s.reports, req.Msg.GetReports()...)
	s.mu.Unlock()
	return connect.NewResponse(&provisioningv1.ReportActionsResponse{}), nil
}

func (s *southbound) gotBatches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

func (s *southbound) ReportIn(_ context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	resp, err := s.reportIn(s.count("reportIn"))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) Heartbeat(_ context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	if s.heartbeat == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no heartbeats here"))
	}
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	resp, err := s.heartbeat(s.count("heartbeat"), req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) ReportHardware(_ context.Context, req *connect.Request[hostv1.ReportHardwareRequest]) (*connect.Response[hostv1.ReportHardwareResponse], error) {
	if s.hardware == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no hardware here"))
	}
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	resp, err := s.hardware(s.count("hardware"), req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *southbound) serveToken(w http.ResponseWriter, r *http.Request) {
	n := s.count("token")
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	status, body := http.StatusOK, ""
	if s.token != nil {
		status, body = s.token(n, r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"))
	}
	if status == http.StatusOK && body == "" {
		tok := fmt.Sprintf("tok-%d", n)
		s.mu.Lock()
		if s.issued == nil {
			s.issued = map[string]bool{}
		}
		s.issued[tok] = true
		s.mu.Unlock()
		body = fmt.Sprintf(`{"access_token":%q,"token_type":"Bearer","expires_in":900}`, tok)
	}
	if s.tokenRetryAfter != nil {
		if v := s.tokenRetryAfter(n); v != "" {
			w.Header().Set("Retry-After", v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

// start serves s over TLS and returns its URL.
func (s *southbound) start(t *testing.T, ca *testCA) string {
	mux := http.NewServeMux()
	mux.Handle(onboardingv1connect.NewOnboardingServiceHandler(s))
	mux.Handle(provisioningv1connect.NewProvisioningServiceHandler(s))
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.HandleFunc("/oauth2/token", s.serveToken)
	return ca.startTLS(t, mux).URL
}

// onboarded is a Discover answer with credentials.
func onboarded(url string) *onboardingv1.DiscoverResponse {
	return &onboardingv1.DiscoverResponse{
		Status: onboardingv1.DiscoverResponse_STATUS_ONBOARDED, HostId: "host-0000abcd", Project: "p1",
		ClientId: "edgenode-host-0000abcd", ClientSecret: "s3cret", TokenUrl: url + "/oauth2/token",
	}
}

// waits records the waits of a Provisioner or Node and returns at once.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// configOf decodes a write-file content as a node config (for checks).
func configOf(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("agent config: %v", err)
	}
	return m
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
