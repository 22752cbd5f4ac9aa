package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// testRecoveryKeys checks eim.RecoveryKeyStore: one key per instance of the
// project, replaced only by a later attempt's, the same key again from its
// attempt taken as a retry, another refused (also at once), per project,
// gone with its instance;
// the put audited with the key redacted, every read audited by its reader.
func testRecoveryKeys(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	h := create(t, s, p1, &eim.Host{Name: "h"}).(*eim.Host).ResourceID
	in := create(t, s, p1, &eim.Instance{Name: "i", HostID: h}).(*eim.Instance).ResourceID
	node := eim.WithActor(ctx(t), eim.NodeActor(h))
	alice := eim.WithActor(ctx(t), eim.UserActor("alice"))

	wantCode(t, s.PutRecoveryKey(node, &eim.RecoveryKey{Project: p1, InstanceID: in}), eim.EINVALID)
	wantCode(t, s.PutRecoveryKey(node, &eim.RecoveryKey{Project: p1, InstanceID: "inst-00000000", SealedKey: "x"}), eim.ENOTFOUND)
	wantCode(t, s.PutRecoveryKey(node, &eim.RecoveryKey{Project: p2, InstanceID: in, SealedKey: "x"}), eim.ENOTFOUND)
	_, err := s.ReadRecoveryKey(alice, p1, in)
	wantCode(t, err, eim.ENOTFOUND)

	read := func(step, sealed string, attempt int) {
		t.Helper()
		got, err := s.ReadRecoveryKey(alice, p1, in)
		if err != nil {
			t.Fatal(err)
		}
		if got.SealedKey != sealed || got.VolumeUUID != "uuid-"+sealed || got.HostID != h || got.Project != p1 || got.InstanceID != in || got.EscrowedAt.IsZero() || got.Attempt != attempt {
			t.Fatalf("%s: got %+v, want %s of attempt %d", step, got, sealed, attempt)
		}
	}
	key := func(sealed, digest string, attempt int) *eim.RecoveryKey {
		return &eim.RecoveryKey{Project: p1, InstanceID: in, HostID: h, VolumeUUID: "uuid-" + sealed, SealedKey: sealed, Attempt: attempt, Digest: digest}
	}
	k := key("sealed-1", "digest-1", 1)
	if err := s.PutRecoveryKey(node, k); err != nil {
		t.Fatalf("first put: %v", err)
	}
	if k.EscrowedAt.IsZero() {
		t.Fatal("first put: EscrowedAt not set")
	}
	read("first put", "sealed-1", 1)
	// The same key again from the same attempt (a retry, sealed anew):
	// accepted, nothing changes.
	if err := s.PutRecoveryKey(node, key("sealed-1-again", "digest-1", 1)); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	read("the same key again", "sealed-1", 1)
	// Another key from the same attempt, or from an older one: refused,
	// the kept key stays.
	for _, k := range []*eim.RecoveryKey{key("sealed-x", "digest-x", 1), key("sealed-x", "", 1), key("sealed-x", "digest-1", 0)} {
		err := s.PutRecoveryKey(node, k)
		wantCode(t, err, eim.EPRECONDITION)
		if !strings.Contains(eim.ErrorMessage(err), "escrowed by attempt 1") {
			t.Fatalf("refused escrow: %q does not name the kept key's attempt", eim.ErrorMessage(err))
		}
	}
	read("after refusals", "sealed-1", 1)
	// A later attempt (the instance provisioned again) replaces it.
	if err := s.PutRecoveryKey(node, key("sealed-2", "digest-2", 2)); err != nil {
		t.Fatalf("a new attempt's key: %v", err)
	}
	read("a new attempt's key", "sealed-2", 2)
	// Two escrows of a third attempt at once: one replaces the key, the
	// other (another key) is refused.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.PutRecoveryKey(node, key(fmt.Sprintf("sealed-3%c", 'a'+i), fmt.Sprintf("digest-3%c", 'a'+i), 3))
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || eim.ErrorCode(errors.Join(errs[0], errs[1])) != eim.EPRECONDITION {
		t.Fatalf("two escrows of one attempt at once: got %v and %v, want one accepted and one EPRECONDITION", errs[0], errs[1])
	}
	won := "sealed-3a"
	if errs[0] != nil {
		won = "sealed-3b"
	}
	read("two at once", won, 3)
	_, err = s.ReadRecoveryKey(alice, p2, in)
	wantCode(t, err, eim.ENOTFOUND)

	recs, _ := audit(t, s, p1, eim.AuditQuery{Filter: `kind = "recoverykey"`, Limit: 10})
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Principal+" "+r.Action)
		if r.ResourceID != in {
			t.Errorf("audit record of %s, want the instance %s", r.ResourceID, in)
		}
		for f, c := range r.Changes {
			if f == "recoveryKey" && string(c.New) != eim.Redacted {
				t.Errorf("audit record shows the key: %s", c.New)
			}
		}
	}
	want := []string{"user:alice READ", "node:" + h + " UPDATED", "user:alice READ", "node:" + h + " UPDATED",
		"user:alice READ", "user:alice READ", "user:alice READ", "node:" + h + " CREATED"}
	if len(actions) != len(want) {
		t.Fatalf("audit records (newest first): got %q, want %q", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("audit records (newest first): got %q, want %q", actions, want)
		}
	}

	// The key goes with its instance.
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, in) })
	_, err = s.ReadRecoveryKey(alice, p1, in)
	wantCode(t, err, eim.ENOTFOUND)
}
