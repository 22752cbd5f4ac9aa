package storetest

import (
	"testing"

	"github.com/eimhq/eim"
)

// testRecoveryKeys checks eim.RecoveryKeyStore: one key per instance of the
// project, replaced by a later put, per project, gone with its instance;
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

	for i, sealed := range []string{"sealed-1", "sealed-2"} {
		k := &eim.RecoveryKey{Project: p1, InstanceID: in, HostID: h, VolumeUUID: "uuid-" + sealed, SealedKey: sealed}
		if err := s.PutRecoveryKey(node, k); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if k.EscrowedAt.IsZero() {
			t.Fatalf("put %d: EscrowedAt not set", i)
		}
		got, err := s.ReadRecoveryKey(alice, p1, in)
		if err != nil {
			t.Fatal(err)
		}
		if got.SealedKey != sealed || got.VolumeUUID != k.VolumeUUID || got.HostID != h || got.Project != p1 || got.InstanceID != in || got.EscrowedAt.IsZero() {
			t.Fatalf("read after put %d: got %+v, want %+v", i, got, k)
		}
	}
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
	want := []string{"user:alice READ", "node:" + h + " UPDATED", "user:alice READ", "node:" + h + " CREATED"}
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
