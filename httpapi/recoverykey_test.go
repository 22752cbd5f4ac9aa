package httpapi_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/seal"
)

// lateKeys is set once the env's store exists.
type lateKeys struct{ svc *provisioning.Service }

func (l *lateKeys) RecoveryKey(ctx context.Context, project, id string) (*eim.RecoveryKey, error) {
	return l.svc.RecoveryKey(ctx, project, id)
}

// The recovery key of an instance's encrypted disk is for administrators
// only; each read is in the audit log, by the reader.
func TestRecoveryKey(t *testing.T) {
	key, err := seal.New(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	late := &lateKeys{}
	e, inst, _ := provEnvOpts(t, "", httpapi.Options{RecoveryKeys: late})
	late.svc = provisioning.New(provisioning.Options{Store: e.inv.Store(), SecretsKey: key})
	path := "~/compute/instances/" + inst + "/recoverykey"

	wantError(t, e.do(t, "GET", path, tokAdmin, nil), 404, "NotFound", "no recovery key")
	if err := e.inv.Store().PutRecoveryKey(context.Background(), &eim.RecoveryKey{Project: "p1", InstanceID: inst, HostID: "host-12345678",
		VolumeUUID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", SealedKey: key.SealText("1a2b3c4d-5e6f", eim.RecoveryKeyPurpose("p1", inst))}); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokRO, tokRW} {
		wantError(t, e.do(t, "GET", path, tok, nil), 403, "PermissionDenied", "eim-admin")
	}
	wantError(t, e.do(t, "GET", path, tokRW2, nil), 403, "PermissionDenied")
	wantError(t, e.do(t, "GET", "~/compute/instances/inst-00000000/recoverykey", tokAdmin, nil), 404, "NotFound")
	r := e.must(t, 200, "GET", path, tokAdmin, nil)
	if r.str("recoveryKey") != "1a2b3c4d-5e6f" || r.str("volumeUuid") != "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9" || r.str("instanceId") != inst || r.str("hostId") != "host-12345678" {
		t.Fatalf("got %s", r.raw)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
	a := e.must(t, 200, "GET", `~/audit?filter=kind%3D%22recoverykey%22%20AND%20action%3D%22READ%22`, tokAdmin, nil)
	recs := a.items("auditRecords")
	if len(recs) != 1 {
		t.Fatalf("audit: got %s, want one read", a.raw)
	}
	if rec := recs[0].(map[string]any); rec["principal"] != "user:admin" || rec["action"] != "READ" || rec["resourceId"] != inst {
		t.Errorf("audit record %v, want READ of %s by user:admin", rec, inst)
	}
}

func TestRecoveryKeyWithoutProvisioning(t *testing.T) {
	e, inst, _ := provEnv(t, "")
	wantError(t, e.do(t, "GET", "~/compute/instances/"+inst+"/recoverykey", tokAdmin, nil), 503, "Unavailable")
	// Non-administrators are refused before that.
	wantError(t, e.do(t, "GET", "~/compute/instances/"+inst+"/recoverykey", tokRW, nil), 403, "PermissionDenied")
}
