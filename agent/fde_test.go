package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/tpmseal"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

func encryptWorkflow() *provisioningv1.Workflow {
	return &provisioningv1.Workflow{Id: "workflow-1", Attempt: 1, Actions: []*provisioningv1.Action{
		{Index: 0, Name: "erase-disk", Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{}}},
		{Index: 1, Name: "encrypt-root", Spec: &provisioningv1.Action_EncryptRoot{EncryptRoot: &provisioningv1.EncryptRoot{Pcrs: []uint32{7}, Label: "eim-root"}}},
		{Index: 2, Name: "reboot", Spec: &provisioningv1.Action_Reboot{Reboot: &provisioningv1.Reboot{}}},
	}}
}

// Before encrypt-root runs, the agent makes a recovery key and escrows it
// with the server (retrying while the server is unavailable); the action
// reaches the executor carrying that key and the volume's UUID. A server
// that will not take the key fails the action before the executor runs
// it: a disk whose only key is in its TPM is not made.
func TestProvisionerEscrowsRecoveryKey(t *testing.T) {
	ca := newTestCA(t)
	var mu sync.Mutex
	var escrowed []*provisioningv1.EscrowRecoveryKeyRequest
	s := &southbound{
		getWorkflow: run(runWF(encryptWorkflow())),
		escrow: func(n int, req *provisioningv1.EscrowRecoveryKeyRequest) error {
			if n == 1 {
				return connect.NewError(connect.CodeUnavailable, errors.New("database restarting"))
			}
			mu.Lock()
			escrowed = append(escrowed, req)
			mu.Unlock()
			return nil
		},
	}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	url = s.start(t, ca)
	rec := &recorder{}
	p, _, _ := newProvisioner(t, ca, url, rec)
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	if len(escrowed) != 1 {
		t.Fatalf("escrowed %d keys, want 1 (after one retry)", len(escrowed))
	}
	e := escrowed[0]
	if e.GetWorkflowId() != "workflow-1" || e.GetAttempt() != 1 || e.GetIndex() != 1 {
		t.Errorf("escrow request %v, want workflow-1 attempt 1 action 1", e)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}(-[0-9a-f]{8}){4}$`).MatchString(e.GetRecoveryKey()) {
		t.Errorf("recovery key %q, want five groups of eight hex digits", e.GetRecoveryKey())
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(e.GetVolumeUuid()) {
		t.Errorf("volume UUID %q, want a version 4 UUID", e.GetVolumeUuid())
	}
	er := rec.ran[1].GetEncryptRoot()
	if er == nil || er.GetRecoveryKey() != e.GetRecoveryKey() || er.GetVolumeUuid() != e.GetVolumeUuid() || er.GetLabel() != "eim-root" {
		t.Errorf("encrypt-root ran as %v, want the escrowed key and UUID", rec.ran[1])
	}

	// A server that predates escrow: the action fails, unrun.
	s2 := &southbound{getWorkflow: run(runWF(encryptWorkflow()))}
	var url2 string
	s2.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url2), nil
	}
	url2 = s2.start(t, ca)
	rec2 := &recorder{}
	p2, _, _ := newProvisioner(t, ca, url2, rec2)
	p2.StopOnFailed = true
	ctx, cancel := context.WithCancel(runCtx(t))
	defer cancel()
	s2.report = func(req *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error) {
		if req.GetState() == provisioningv1.ActionState_ACTION_STATE_FAILED {
			if req.GetIndex() != 1 || !strings.Contains(req.GetMessage(), "escrow the recovery key") {
				t.Errorf("failure report %v, want encrypt-root failed escrowing the key", req)
			}
			cancel()
		}
		return &provisioningv1.ReportActionResponse{}, nil
	}
	_, _ = p2.Run(ctx)
	for _, n := range rec2.names() {
		if n == "encrypt-root" {
			t.Error("encrypt-root ran without an escrowed recovery key")
		}
	}
}

// encrypt-root checks what it can before it writes: an escrowed key, a
// TPM, an ext file system that leaves the header's 16 MiB free, a
// partition not encrypted already. Each refusal says why and leaves the
// partition as it was.
func TestEncryptRootRefuses(t *testing.T) {
	dir := t.TempDir()
	ext := func(fsBlocks uint32) []byte {
		b := make([]byte, 20<<20)
		sb := b[1024:]
		sb[56], sb[57] = 0x53, 0xef // magic
		le32(sb[4:], fsBlocks)      // blocks (1 KiB: log block size 0)
		return b
	}
	luks := mustLUKS2(t, filepath.Join(dir, "luks"))
	withTPM := func() (io.ReadWriteCloser, error) { return nopTPM{}, nil }
	noTPM := func() (io.ReadWriteCloser, error) { return nil, tpmseal.ErrNoTPM }
	key := &provisioningv1.EncryptRoot{RecoveryKey: "k", VolumeUuid: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}
	for _, tt := range []struct {
		name string
		part []byte
		tpm  func() (io.ReadWriteCloser, error)
		spec *provisioningv1.EncryptRoot
		want string
	}{
		{"no recovery key", ext(1024), withTPM, &provisioningv1.EncryptRoot{}, "no recovery key escrowed"},
		{"no TPM", ext(1024), noTPM, key, "no TPM 2.0"},
		{"no file system", make([]byte, 20<<20), withTPM, key, "no ext2/3/4 file system"},
		{"file system fills the partition", ext(8 << 10), withTPM, key, "must leave 16777216 bytes (16 MiB) free"},
		{"encrypted already", luks, withTPM, key, "encrypted already"},
	} {
		disk := filepath.Join(dir, "disk")
		if err := os.WriteFile(disk+"1", tt.part, 0o600); err != nil {
			t.Fatal(err)
		}
		spec := proto.CloneOf(tt.spec)
		spec.Device, spec.Partition = disk, 1
		m := &agent.Machine{OpenTPM: tt.tpm}
		var out bytes.Buffer
		err := m.Run(context.Background(), &provisioningv1.Action{Name: "encrypt-root", Spec: &provisioningv1.Action_EncryptRoot{EncryptRoot: spec}}, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
		after, _ := os.ReadFile(disk + "1")
		if sha256.Sum256(after) != sha256.Sum256(tt.part) {
			t.Errorf("%s: the partition was written", tt.name)
		}
	}
}

// mustLUKS2 returns the bytes of a 20 MiB LUKS2 volume.
func mustLUKS2(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := luks2.Format(f, 20<<20, []byte("key"), luks2.Options{KDF: luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, make([]byte, 20<<20-len(b))...)
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

// nopTPM stands for a TPM the refused actions never talk to.
type nopTPM struct{}

func (nopTPM) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopTPM) Write(p []byte) (int, error) { return len(p), nil }
func (nopTPM) Close() error                { return nil }

// checkingRecorder records the actions it runs and checks encrypt-root
// before escrow as the Machine does.
type checkingRecorder struct {
	*recorder
	m *agent.Machine
}

func (c checkingRecorder) CheckEncryptRoot(ctx context.Context, e *provisioningv1.EncryptRoot) error {
	return c.m.CheckEncryptRoot(ctx, e)
}

// encrypt-root run again on a partition it encrypted already is refused
// before a recovery key is escrowed: a new key would replace, in EIM, the
// one that opens the disk. The action fails saying why; nothing is
// escrowed and nothing runs.
func TestEncryptRootAgainEscrowsNothing(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk")
	if err := os.WriteFile(disk+"1", mustLUKS2(t, filepath.Join(dir, "luks")), 0o600); err != nil {
		t.Fatal(err)
	}
	wf := encryptWorkflow()
	wf.Actions[1].GetEncryptRoot().Device, wf.Actions[1].GetEncryptRoot().Partition = disk, 1
	ca := newTestCA(t)
	var mu sync.Mutex
	escrowed := 0
	s := &southbound{
		getWorkflow: run(runWF(wf)),
		escrow: func(int, *provisioningv1.EscrowRecoveryKeyRequest) error {
			mu.Lock()
			escrowed++
			mu.Unlock()
			return nil
		},
	}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	url = s.start(t, ca)
	rec := &recorder{}
	p, _, _ := newProvisioner(t, ca, url, checkingRecorder{rec, &agent.Machine{}})
	p.StopOnFailed = true
	ctx, cancel := context.WithCancel(runCtx(t))
	defer cancel()
	var failure string
	s.report = func(req *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error) {
		if req.GetState() == provisioningv1.ActionState_ACTION_STATE_FAILED {
			mu.Lock()
			failure = req.GetMessage()
			mu.Unlock()
			cancel()
		}
		return &provisioningv1.ReportActionResponse{}, nil
	}
	_, _ = p.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(failure, "is encrypted already") || !strings.Contains(failure, "no new recovery key escrowed") {
		t.Errorf("failure %q, want encrypt-root refused as encrypted already, nothing escrowed", failure)
	}
	if escrowed != 0 {
		t.Errorf("%d recovery keys escrowed for a disk encrypted already, want none", escrowed)
	}
	for _, n := range rec.names() {
		if n == "encrypt-root" {
			t.Error("encrypt-root ran on a disk encrypted already")
		}
	}
}
