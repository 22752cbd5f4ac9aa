package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// checkingExec is an Executor that downloads stream-image's URL and checks
// its sha256 (as the real one does) and does nothing for the other actions.
type checkingExec struct{ hc *http.Client }

func (x checkingExec) Run(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
	s := a.GetStreamImage()
	if s == nil {
		fmt.Fprintf(out, "%s done\n", a.GetName())
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.GetUrl(), nil)
	if err != nil {
		return err
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != s.GetSha256() {
		return errors.New("sha256 mismatch: got " + got)
	}
	fmt.Fprintln(out, "image verified")
	return nil
}

// A node whose image checksum is wrong fails; the operator fixes the OS
// profile and runs `eim instance reprovision`; the same node, still
// polling, runs attempt 2 with the fixed checksum to the end.
func TestReprovisionEndToEnd(t *testing.T) { testReprovisionEndToEnd(t, startDay0(t)) }

func TestReprovisionEndToEndPostgres(t *testing.T) {
	testReprovisionEndToEnd(t, startDay0(t, "--database", freshPostgres(t)))
}

func testReprovisionEndToEnd(t *testing.T, s *day0Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The image server serves a corrupt image until it is mended: a cause
	// outside EIM, fixed, then the provisioning retried. (An OS profile's
	// image and checksum cannot be changed, as in the original.)
	img, err := os.ReadFile(filepath.Join(s.bootDir, "os.img"))
	if err != nil {
		t.Fatal(err)
	}
	var mended atomic.Bool
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !mended.Load() {
			w.Write(img[:len(img)/2])
			return
		}
		w.Write(img)
	}))
	defer imgSrv.Close()
	sum := sha256.Sum256(img)
	var osr eim.OS
	if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindOS, map[string]string{
		"name": "served-os", "profileName": "served-os", "imageUrl": imgSrv.URL + "/os.img", "sha256": hex.EncodeToString(sum[:]),
	}, &osr); err != nil {
		t.Fatalf("create OS: %v", err)
	}
	good := osr.ResourceID
	ids := sim.Generate(1, 77)
	hostIDs := register(t, s, eim.DefaultProject, good, ids)

	hc := s.agentClient(t)
	p := &agent.Provisioner{
		Client: hc, URL: s.agentURL, CACertPEM: []byte(s.ca(t)),
		Identity: agent.Identity{UUID: ids[0].UUID, Serial: ids[0].Serial, Hostname: ids[0].Hostname},
		Exec:     checkingExec{hc: http.DefaultClient},
		Backoff:  agent.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		// The server's polls (60 s while failed) are shortened.
		Wait: func(ctx context.Context, d time.Duration) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(d, 50*time.Millisecond)):
				return nil
			}
		},
	}
	done := make(chan error, 1)
	var res agent.Result
	go func() {
		var err error
		res, err = p.Run(ctx)
		done <- err
	}()

	instance := func() *eim.Instance {
		var h eim.Host
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, hostIDs[0], &h); err != nil {
			t.Fatal(err)
		}
		return h.Instance
	}
	waitFor(t, "the workflow to fail", func() bool {
		in := instance()
		return in != nil && strings.HasPrefix(in.ProvisioningStatus, "Provisioning Failed: 2/7 stream-image: sha256 mismatch")
	})
	inst := instance().ResourceID
	mended.Store(true)
	var out, errOut bytes.Buffer
	err = Main(ctx, []string{"--server", s.api, "--token-file", filepath.Join(s.dataDir, adminTokenFile), "instance", "reprovision", inst, "-f"}, &out, &errOut)
	if err != nil {
		t.Fatalf("eim instance reprovision -f: %v; stderr %s", err, errOut.String())
	}
	for _, want := range []string{"[workflow, attempt 2] retry requested by", "[2/7 stream-image] SUCCEEDED", "image verified", "[workflow, attempt 2] workflow succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not contain %q:\n%s", want, out.String())
		}
	}
	select {
	case err := <-done:
		if err != nil || !res.Rebooted {
			t.Fatalf("provisioner: got %+v, %v; want rebooted", res, err)
		}
	case <-ctx.Done():
		t.Fatal("the provisioner did not finish")
	}
	if in := instance(); in.ProvisioningStatus != "Provisioned" || in.ProvisioningStatusIndicator != eim.StatusIdle {
		t.Fatalf("got instance status %q %s, want Provisioned IDLE", in.ProvisioningStatus, in.ProvisioningStatusIndicator)
	}
	// Another retry is refused now that the workflow succeeded.
	if _, err := s.admin.Reprovision(ctx, eim.DefaultProject, inst); eim.ErrorCode(err) != eim.EPRECONDITION {
		t.Fatalf("reprovision a succeeded workflow: got %v, want EPRECONDITION", err)
	}
}
