package provisioning_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest"
	"github.com/eimhq/eim/attest/attesttest"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// The measured boot a node sends with GetWorkflow is checked against the
// EFI binaries of the artifacts directory when its workflow is created,
// and shown as the instance's trustedAttestationStatus.
func TestGetWorkflowAttests(t *testing.T) {
	ipxe, kernel, other := petest.Minimal(1), petest.Minimal(2), petest.Minimal(3)
	// The unified kernel image a deployment that requires Secure Boot
	// boots, and one whose initramfs was changed after it was built.
	uki, err := secureboot.AddSections(petest.Minimal(4), secureboot.Section{Name: ".cmdline", Data: []byte("eim.url=x")},
		secureboot.Section{Name: ".initrd", Data: []byte("initramfs")})
	if err != nil {
		t.Fatal(err)
	}
	changedUKI := bytes.Clone(uki)
	changedUKI[len(changedUKI)-512] ^= 1
	artifacts := func() string {
		dir := t.TempDir()
		for name, b := range map[string][]byte{"ipxe.efi": ipxe, provisioning.KernelName: kernel, provisioning.InitrdName: []byte("not EFI"), provisioning.UKIName: uki} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	digest := func(b []byte) []byte {
		a, err := attest.ArtifactOf("x", b)
		if err != nil {
			t.Fatal(err)
		}
		return a.Digest
	}
	measured := func(apps ...[]byte) *provisioningv1.MeasuredBoot {
		b := attesttest.NewBoot(apps...)
		mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: b.EventLog}
		for i, v := range b.PCRs {
			mb.Pcrs = append(mb.Pcrs, &provisioningv1.Pcr{Index: uint32(i), Sha256: v})
		}
		return mb
	}
	changedPCR := measured(digest(ipxe), digest(kernel))
	for _, p := range changedPCR.Pcrs {
		if p.Index == 0 {
			p.Sha256 = make([]byte, 32)
		}
	}
	const (
		sbFDE = eim.SecurityFeature("SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION")
		none  = eim.SecurityFeature("SECURITY_FEATURE_NONE")
	)
	enabled, disabled := provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED
	type attestCase struct {
		name    string
		feature eim.SecurityFeature
		sb      provisioningv1.SecureBootState
		mb      *provisioningv1.MeasuredBoot
		want    string // prefix; "" when nothing is written
		ind     eim.StatusIndication
	}
	tests := []attestCase{
		{"served chain", sbFDE, enabled, measured(digest(ipxe), digest(kernel)), provisioning.AttestationUnquoted, eim.StatusIdle},
		{"served UKI", sbFDE, enabled, measured(digest(ipxe), digest(uki)), provisioning.AttestationUnquoted, eim.StatusIdle},
		{"UKI changed", sbFDE, enabled, measured(digest(ipxe), digest(changedUKI)), "Mismatch: PCR 4: unexpected boot code", eim.StatusError},
		{"another kernel", sbFDE, enabled, measured(digest(ipxe), digest(other)), "Mismatch: PCR 4: unexpected boot code: an EFI application from \\EFI\\BOOT\\BOOTX64.EFI with Authenticode SHA-256 ", eim.StatusError},
		{"PCR value", none, disabled, changedPCR, "Mismatch: PCR 0: the TPM's value 0000", eim.StatusError},
		{"garbage log", none, disabled, &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: []byte("x")}, "Not verified: event log", eim.StatusError},
		{"no TPM", none, disabled, &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}, "No TPM: ", eim.StatusIdle},
		{"no TPM, required", sbFDE, enabled, &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}, "No TPM: ", eim.StatusError},
		{"TPM unreadable", none, disabled, &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, Error: "the TPM is a TPM 1.2"}, "Not measured: the TPM is a TPM 1.2", eim.StatusIdle},
		{"older agent", none, disabled, nil, "", ""},
	}
	runWith(t, func(o *provisioning.Options) { o.ArtifactsDir = artifacts() }, func(t *testing.T, e *env) {
		osr := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		// A kernel rebuilt after the server started is the one checked
		// (the digests are remembered by size and time): the other
		// kernel's boot verifies, the first one's no longer does.
		tests := append(tests,
			attestCase{"kernel rebuilt", sbFDE, enabled, measured(digest(ipxe), digest(other)), provisioning.AttestationUnquoted, eim.StatusIdle},
			attestCase{"old kernel after the rebuild", sbFDE, enabled, measured(digest(ipxe), digest(kernel)), "Mismatch: PCR 4", eim.StatusError})
		for i, tt := range tests {
			if tt.name == "kernel rebuilt" {
				path := filepath.Join(e.opts.ArtifactsDir, provisioning.KernelName)
				if err := os.WriteFile(path, other, 0o644); err != nil {
					t.Fatal(err)
				}
				later := time.Now().Add(time.Duration(i) * time.Second)
				if err := os.Chtimes(path, later, later); err != nil {
					t.Fatal(err)
				}
			}
			h := e.host()
			in := e.instance(h, osr, func(in *eim.Instance) { in.SecurityFeature = tt.feature })
			resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{
				AgentVersion: "test", SecureBoot: tt.sb, MeasuredBoot: tt.mb}))
			if err != nil {
				t.Fatalf("%s: GetWorkflow: %v", tt.name, err)
			}
			// The status does not stop provisioning; full-disk encryption
			// without a TPM does (TestGetWorkflowChecksTPM).
			if noTPM := tt.feature == sbFDE && tt.mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_ABSENT; noTPM {
				if resp.Msg.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED {
					t.Errorf("%s: got %v, want FAILED: full-disk encryption needs a TPM", tt.name, resp.Msg.Disposition)
				}
			} else if resp.Msg.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN {
				t.Errorf("%s: got %v (%s), want RUN: the status says, it does not stop provisioning", tt.name, resp.Msg.Disposition, resp.Msg.Message)
			}
			got := e.getInstance(in.ResourceID)
			if !strings.HasPrefix(got.TrustedAttestationStatus, tt.want) || (tt.want == "") != (got.TrustedAttestationStatus == "") || got.TrustedAttestationStatusIndicator != tt.ind && tt.want != "" {
				t.Errorf("%s: got %q %s, want %q… %s", tt.name, got.TrustedAttestationStatus, got.TrustedAttestationStatusIndicator, tt.want, tt.ind)
			}
			if tt.want != "" && got.TrustedAttestationStatusTimestamp != uint64(e.clock.Now().Unix()) {
				t.Errorf("%s: timestamp %d, want %d", tt.name, got.TrustedAttestationStatusTimestamp, e.clock.Now().Unix())
			}
		}
	})
}

// An agent withholds its measured boot while the server's answers say
// measured_boot_later; the server asks for it (WAIT without that) when it
// is about to create the workflow, which it creates once it has it.
func TestGetWorkflowWithheldMeasuredBoot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		osr := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		h := e.host()
		mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}
		ask := func(mb *provisioningv1.MeasuredBoot, withheld bool) *provisioningv1.GetWorkflowResponse {
			t.Helper()
			resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{
				AgentVersion: "test", MeasuredBoot: mb, MeasuredBootWithheld: withheld}))
			if err != nil {
				t.Fatalf("GetWorkflow: %v", err)
			}
			return resp.Msg
		}
		type want struct {
			disp  provisioningv1.GetWorkflowResponse_Disposition
			later bool
		}
		check := func(step string, got *provisioningv1.GetWorkflowResponse, w want) {
			t.Helper()
			if got.Disposition != w.disp || got.MeasuredBootLater != w.later {
				t.Fatalf("%s: got %v, later %v (%s); want %v, later %v", step, got.Disposition, got.MeasuredBootLater, got.Message, w.disp, w.later)
			}
		}
		wait, run := provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT, provisioningv1.GetWorkflowResponse_DISPOSITION_RUN
		check("first request, no instance", ask(mb, false), want{wait, true})
		check("withheld, no instance", ask(nil, true), want{wait, true})

		in := e.instance(h, osr, nil)
		got := ask(nil, true)
		check("withheld, an instance", got, want{wait, false})
		if got.PollAfterSeconds == 0 || got.PollAfterSeconds > 2 {
			t.Errorf("asking for the measured boot: poll after %d s, want 1 or 2", got.PollAfterSeconds)
		}
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; s != "" {
			t.Errorf("before the measured boot came: attestation %q, want none (no workflow yet)", s)
		}
		check("measured boot sent", ask(mb, false), want{run, true})
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; !strings.HasPrefix(s, "No TPM") {
			t.Errorf("attestation: got %q, want No TPM…", s)
		}
		check("withheld, the workflow exists", ask(nil, true), want{run, true})
		// An agent older than the withholding: nothing asked of it.
		check("older agent", ask(nil, false), want{run, true})
	})
}
