package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// testObjectStorage checks eim.ObjectStorageStore: one setting per
// project, created and replaced by PutObjectStorage (an empty secret keeps
// the stored one; a new setting needs one), per project, gone with its
// project, audited with the secret redacted.
func testObjectStorage(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)

	o := &eim.ObjectStorage{Project: p1, Endpoint: "https://s3.example", Bucket: "edge", KeyPrefix: "eim/", Region: "eu-west-1",
		PathStyle: true, AccessKeyID: "AKID", SealedSecretKey: "sealed-1", MaxFileSize: 1 << 20, BucketPerDevice: "eim-{hostId}",
		Reachable: eim.StorageReachable{Status: eim.StorageUnreachable, LastError: "403 Forbidden"}}
	wantCode(t, s.PutObjectStorage(ctx(t), &eim.ObjectStorage{Project: p1, Endpoint: "https://a", Bucket: "b", Region: "r", AccessKeyID: "k"}), eim.EINVALID)
	wantCode(t, s.PutObjectStorage(ctx(t), &eim.ObjectStorage{Project: "no-such-project", Endpoint: "https://a", Bucket: "b", Region: "r", AccessKeyID: "k", SealedSecretKey: "x"}), eim.ENOTFOUND)
	_, err := s.GetObjectStorage(ctx(t), p1)
	wantCode(t, err, eim.ENOTFOUND)
	if err := s.PutObjectStorage(ctx(t), o); err != nil {
		t.Fatal(err)
	}
	if o.CreatedAt.IsZero() || o.UpdatedAt.IsZero() {
		t.Fatalf("put: times not set: %+v", o)
	}
	got, err := s.GetObjectStorage(ctx(t), p1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Project != p1 || got.Endpoint != o.Endpoint || got.Bucket != "edge" || got.KeyPrefix != "eim/" || got.Region != "eu-west-1" ||
		!got.PathStyle || got.AccessKeyID != "AKID" || got.SealedSecretKey != "sealed-1" || got.MaxFileSize != 1<<20 ||
		got.BucketPerDevice != "eim-{hostId}" || got.Reachable.Status != eim.StorageUnreachable || got.Reachable.LastError != "403 Forbidden" {
		t.Fatalf("get: got %+v, want %+v", got, o)
	}
	// Another project sees none, and cannot delete this one's.
	_, err = s.GetObjectStorage(ctx(t), p2)
	wantCode(t, err, eim.ENOTFOUND)
	wantCode(t, s.DeleteObjectStorage(ctx(t), p2), eim.ENOTFOUND)

	// Replaced without a secret: the stored one stays.
	r := &eim.ObjectStorage{Project: p1, Endpoint: "http://127.0.0.1:9000", Bucket: "edge2", Region: "us-east-1", AccessKeyID: "AKID2",
		Reachable: eim.StorageReachable{Status: eim.StorageReachableOK}}
	if err := s.PutObjectStorage(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetObjectStorage(ctx(t), p1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != r.Endpoint || got.Bucket != "edge2" || got.KeyPrefix != "" || got.PathStyle || got.MaxFileSize != 0 || got.BucketPerDevice != "" ||
		got.SealedSecretKey != "sealed-1" || r.SealedSecretKey != "sealed-1" || !got.CreatedAt.Equal(o.CreatedAt.Time) ||
		got.Reachable.Status != eim.StorageReachableOK || got.Reachable.LastError != "" {
		t.Fatalf("replaced: got %+v, want the new settings, the old secret and creation time", got)
	}
	r.SealedSecretKey = "sealed-2"
	if err := s.PutObjectStorage(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetObjectStorage(ctx(t), p1); got == nil || got.SealedSecretKey != "sealed-2" {
		t.Fatalf("replaced with a secret: got %+v, want sealed-2", got)
	}

	// The audit records: the secret redacted, never its stored value.
	recs, _ := audit(t, s, p1, eim.AuditQuery{Filter: `kind="objectstorage"`})
	if len(recs) != 3 {
		t.Fatalf("audit: got %d records, want 3 (create, update, update)", len(recs))
	}
	for _, rec := range recs {
		raw, _ := json.Marshal(rec)
		if strings.Contains(string(raw), "sealed-") {
			t.Fatalf("audit record %s holds the stored secret", raw)
		}
	}
	if c := recs[0].Changes["secretAccessKey"]; recs[0].ResourceID != p1 || string(c.New) != eim.Redacted {
		t.Fatalf("audit of the secret's change (newest first): got %+v, want the secret redacted", recs[0])
	}
	if _, ok := recs[1].Changes["secretAccessKey"]; ok || string(recs[1].Changes["bucket"].New) != `"edge2"` {
		t.Fatalf("audit of a replace keeping the secret: got %+v, want no secret change, the new bucket", recs[1].Changes)
	}

	// Puts racing to create a project's setting all succeed: one creates
	// it, the others replace it.
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			errs <- s.PutObjectStorage(ctx(t), &eim.ObjectStorage{Project: p2, Endpoint: "https://s3.example", Bucket: "b2", Region: "r", AccessKeyID: "k", SealedSecretKey: fmt.Sprint("s", i)})
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("racing puts: %v", err)
		}
	}

	if err := s.DeleteObjectStorage(ctx(t), p1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteObjectStorage(ctx(t), p1), eim.ENOTFOUND)
	_, err = s.GetObjectStorage(ctx(t), p1)
	wantCode(t, err, eim.ENOTFOUND)

	// A setting goes with its project.
	if err := s.DeleteProject(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetObjectStorage(ctx(t), p2)
	wantCode(t, err, eim.ENOTFOUND)
}
