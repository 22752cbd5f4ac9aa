package provisioning_test

import (
	"bytes"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/seal"
)

// A node escrows the recovery key of the disk its workflow's encrypt-root
// action is about to encrypt: only for its own current attempt and that
// action; the key is stored sealed (not in the clear), taken again as a
// retry, refused when another key comes within the same attempt, replaced
// by the key of a new attempt (the instance provisioned again), and read
// back opened, each read audited by its reader.
func TestEscrowRecoveryKey(t *testing.T) {
	key, err := seal.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	runWith(t, func(o *provisioning.Options) { o.SecretsKey = key }, func(t *testing.T, e *env) {
		osr := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		h, other := e.host(), e.host()
		in := e.instance(h, osr, func(in *eim.Instance) {
			in.SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"
		})
		wf := e.getWorkflowMB(h.ResourceID, provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED,
			&provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, Error: "not read in this test"}).GetWorkflow()
		if wf == nil {
			t.Fatal("no workflow")
		}
		escrow := func(hostID string, m *provisioningv1.EscrowRecoveryKeyRequest) error {
			_, err := e.svc.EscrowRecoveryKey(asNode(e.ctx, e.proj, hostID), connect.NewRequest(m))
			return err
		}
		good := func(k string) *provisioningv1.EscrowRecoveryKeyRequest {
			return &provisioningv1.EscrowRecoveryKeyRequest{WorkflowId: wf.GetId(), Attempt: wf.GetAttempt(), Index: 2, RecoveryKey: k, VolumeUuid: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}
		}
		bad := []struct {
			name string
			host string
			edit func(*provisioningv1.EscrowRecoveryKeyRequest)
			code connect.Code
		}{
			{"no key", h.ResourceID, func(m *provisioningv1.EscrowRecoveryKeyRequest) { m.RecoveryKey = "" }, connect.CodeInvalidArgument},
			{"key too long", h.ResourceID, func(m *provisioningv1.EscrowRecoveryKeyRequest) {
				m.RecoveryKey = string(bytes.Repeat([]byte("k"), 513))
			}, connect.CodeInvalidArgument},
			{"not a workflow ID", h.ResourceID, func(m *provisioningv1.EscrowRecoveryKeyRequest) { m.WorkflowId = "inst-12345678" }, connect.CodeInvalidArgument},
			{"not the encrypt-root action", h.ResourceID, func(m *provisioningv1.EscrowRecoveryKeyRequest) { m.Index = 1 }, connect.CodeInvalidArgument},
			{"another attempt", h.ResourceID, func(m *provisioningv1.EscrowRecoveryKeyRequest) { m.Attempt = 2 }, connect.CodeFailedPrecondition},
			{"another node", other.ResourceID, func(*provisioningv1.EscrowRecoveryKeyRequest) {}, connect.CodeNotFound},
		}
		for _, tt := range bad {
			m := good("key")
			tt.edit(m)
			if err := escrow(tt.host, m); connect.CodeOf(err) != tt.code {
				t.Errorf("%s: got %v, want %v", tt.name, err, tt.code)
			}
		}
		admin := eim.WithActor(e.ctx, eim.UserActor("alice"))
		if _, err := e.svc.RecoveryKey(admin, e.proj, in.ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Errorf("before any escrow: got %v, want ENOTFOUND", err)
		}
		read := func(step, want string, attempt int) {
			t.Helper()
			got, err := e.svc.RecoveryKey(admin, e.proj, in.ResourceID)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if got.Key != want || got.VolumeUUID != "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9" || got.HostID != h.ResourceID || got.Attempt != attempt {
				t.Errorf("%s: got key %q volume %q host %s attempt %d, want %q of %s, attempt %d", step, got.Key, got.VolumeUUID, got.HostID, got.Attempt, want, h.ResourceID, attempt)
			}
			if bytes.Contains([]byte(got.SealedKey), []byte(want)) {
				t.Errorf("stored in the clear: %q", got.SealedKey)
			}
		}
		if err := escrow(h.ResourceID, good("first-key")); err != nil {
			t.Fatalf("escrow: %v", err)
		}
		read("escrowed", "first-key", 1)
		// The same key again (the node's retry after a lost answer).
		if err := escrow(h.ResourceID, good("first-key")); err != nil {
			t.Fatalf("the same key again: %v", err)
		}
		// Another key within the same attempt (someone with the node's
		// identity, or the action run again): refused, the key kept.
		err := escrow(h.ResourceID, good("attacker-key"))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "a new key replaces it only when the instance is provisioned again") {
			t.Fatalf("another key in the same attempt: got %v, want FailedPrecondition saying why", err)
		}
		read("after a refused escrow", "first-key", 1)

		// The instance provisioned again (its workflow failed, retried):
		// the new attempt's key replaces the old.
		e.mustReport(h.ResourceID, wf, 0, running, "", "")
		e.mustReport(h.ResourceID, wf, 0, failed, "disk gone", "")
		retry, err := e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		second := good("second-key")
		second.Attempt = uint32(retry.Attempt)
		if err := escrow(h.ResourceID, second); err != nil {
			t.Fatalf("the new attempt's key: %v", err)
		}
		read("the new attempt's key", "second-key", 2)
		recs, _, err := e.store.Audit(e.ctx, e.proj, eim.AuditQuery{Filter: `kind = "recoverykey" AND action = "READ"`, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 3 || recs[0].Principal != "user:alice" || recs[0].ResourceID != in.ResourceID {
			t.Errorf("audit records of the reads: got %+v, want three by user:alice of %s", recs, in.ResourceID)
		}
	})
	// A server without a secrets key takes no key, and says why.
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		_, err := e.svc.EscrowRecoveryKey(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.EscrowRecoveryKeyRequest{
			WorkflowId: "workflow-12345678", Attempt: 1, Index: 2, RecoveryKey: "k"}))
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("without a secrets key: got %v, want Unavailable", err)
		}
	})
}
