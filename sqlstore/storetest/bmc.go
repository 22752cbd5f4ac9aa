package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testBMCs checks eim.BMCStore: one BMC per host of the project, created
// and replaced by PutBMC (an empty password keeps the stored one; a new
// BMC needs one), what the module found reset by a put, per project, gone
// with its host and with its project, audited with the password redacted;
// each put and delete is a KindBMC event in the feed.
func testBMCs(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	h1 := create(t, s, p1, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	other := create(t, s, p2, &eim.Host{Name: "o"}).(*eim.Host).ResourceID

	b := &eim.BMC{Project: p1, HostID: h1, Protocol: eim.BMCRedfish, Address: "https://10.0.0.1", SystemID: "1", Username: "admin", SealedPassword: "sealed-1", Insecure: true,
		PowerPolicy: eim.PowerPolicyAlwaysOn}
	wantCode(t, s.PutBMC(ctx(t), &eim.BMC{Project: p1, HostID: h1, Protocol: eim.BMCIPMI, Address: "10.0.0.1", Username: "u"}), eim.EINVALID)
	wantCode(t, s.PutBMC(ctx(t), &eim.BMC{Project: p1, HostID: "host-00000000", Protocol: eim.BMCIPMI, Address: "a", Username: "u", SealedPassword: "x"}), eim.ENOTFOUND)
	// Another project's host is not found in this one.
	wantCode(t, s.PutBMC(ctx(t), &eim.BMC{Project: p1, HostID: other, Protocol: eim.BMCIPMI, Address: "a", Username: "u", SealedPassword: "x"}), eim.ENOTFOUND)
	if err := s.PutBMC(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	if b.CreatedAt.IsZero() || b.UpdatedAt.IsZero() {
		t.Fatalf("put: times not set: %+v", b)
	}
	got, err := s.GetBMC(ctx(t), p1, h1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Project != p1 || got.HostID != h1 || got.Protocol != eim.BMCRedfish || got.Address != b.Address || got.SystemID != "1" ||
		got.Username != "admin" || got.SealedPassword != "sealed-1" || !got.Insecure || got.CACert != "" || got.PowerPolicy != eim.PowerPolicyAlwaysOn {
		t.Fatalf("get: got %+v, want %+v", got, b)
	}
	// A site's power policy (the level below the BMC's) is kept too.
	site := create(t, s, p1, &eim.Site{Name: "s", PowerPolicy: eim.PowerPolicyReport}).(*eim.Site)
	update(t, s, p1, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindSite, site.ResourceID)
		if err == nil && r.(*eim.Site).PowerPolicy != eim.PowerPolicyReport {
			t.Errorf("site's powerPolicy: got %q, want REPORT", r.(*eim.Site).PowerPolicy)
		}
		return err
	})
	_, err = s.GetBMC(ctx(t), p1, h2)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = s.GetBMC(ctx(t), p2, h1)
	wantCode(t, err, eim.ENOTFOUND)
	wantCode(t, s.DeleteBMC(ctx(t), p2, h1), eim.ENOTFOUND)

	// Replaced without a password: the stored one stays.
	r := &eim.BMC{Project: p1, HostID: h1, Protocol: eim.BMCIPMI, Address: "10.0.0.2:623", Username: "root"}
	if err := s.PutBMC(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetBMC(ctx(t), p1, h1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Protocol != eim.BMCIPMI || got.Address != "10.0.0.2:623" || got.Username != "root" || got.SystemID != "" || got.Insecure || got.PowerPolicy != "" ||
		got.SealedPassword != "sealed-1" || r.SealedPassword != "sealed-1" || !got.CreatedAt.Equal(b.CreatedAt.Time) {
		t.Fatalf("replaced: got %+v, want the new settings, the old password and creation time", got)
	}
	r.SealedPassword = "sealed-2"
	if err := s.PutBMC(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetBMC(ctx(t), p1, h1); got == nil || got.SealedPassword != "sealed-2" {
		t.Fatalf("replaced with a password: got %+v, want sealed-2", got)
	}
	if err := s.PutBMC(ctx(t), &eim.BMC{Project: p1, HostID: h2, Protocol: eim.BMCAMT, Address: "amt.example", Username: "admin", SealedPassword: "s"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListBMCs(ctx(t), p1)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !slices.IsSortedFunc(list, func(a, b *eim.BMC) int { return strings.Compare(a.HostID, b.HostID) }) {
		t.Fatalf("list: got %d BMCs, want 2 by host ID", len(list))
	}
	if list, _ := s.ListBMCs(ctx(t), p2); len(list) != 0 {
		t.Fatalf("list of another project: got %d, want 0", len(list))
	}

	// The audit records: the password redacted, never its stored value.
	recs, _ := audit(t, s, p1, eim.AuditQuery{Filter: `kind="bmc"`})
	if len(recs) != 4 {
		t.Fatalf("audit: got %d records, want 4 (create, update, update, create)", len(recs))
	}
	for _, rec := range recs {
		raw, _ := json.Marshal(rec)
		if strings.Contains(string(raw), "sealed-") {
			t.Fatalf("audit record %s holds the stored password", raw)
		}
	}
	if c := recs[1].Changes["password"]; recs[1].ResourceID != h1 || recs[1].Action != string(eim.OpUpdated) || string(c.New) != eim.Redacted {
		t.Fatalf("audit of the password's change: got %+v, want the password redacted", recs[1])
	}
	if _, ok := recs[2].Changes["password"]; ok || string(recs[2].Changes["address"].New) != `"10.0.0.2:623"` {
		t.Fatalf("audit of a replace keeping the password: got %+v, want no password change, the new address", recs[2].Changes)
	}

	// Puts racing to create one host's BMC all succeed: one creates it,
	// the others replace it.
	h3 := create(t, s, p1, &eim.Host{Name: "h3"}).(*eim.Host).ResourceID
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			errs <- s.PutBMC(ctx(t), &eim.BMC{Project: p1, HostID: h3, Protocol: eim.BMCIPMI, Address: "10.0.0.3", Username: "u", SealedPassword: fmt.Sprint("s", i)})
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("racing puts: %v", err)
		}
	}
	if err := s.DeleteBMC(ctx(t), p1, h3); err != nil {
		t.Fatal(err)
	}

	// What the module found is recorded without touching the settings;
	// nil capabilities keep those recorded; another project's is not found.
	caps := &eim.BMCCapabilities{ResetTypes: []string{"ON", "FORCE_OFF"}, BootTargets: []string{"PXE"}}
	reach := eim.BMCReachable{Status: "REACHABLE", CheckedAt: eim.NewTime(time.Now())}
	if err := s.RecordBMCFound(ctx(t), p1, h2, caps, reach); err != nil {
		t.Fatalf("RecordBMCFound: %v", err)
	}
	down := eim.BMCReachable{Status: "UNREACHABLE", LastError: "read power state: unreachable", CheckedAt: eim.NewTime(time.Now())}
	if err := s.RecordBMCFound(ctx(t), p1, h2, nil, down); err != nil {
		t.Fatalf("RecordBMCFound without capabilities: %v", err)
	}
	found, err := s.GetBMC(ctx(t), p1, h2)
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Capabilities.ResetTypes) != 2 || found.Capabilities.BootTargets[0] != "PXE" || found.Reachable.Status != "UNREACHABLE" ||
		found.Reachable.LastError != down.LastError || !found.Reachable.CheckedAt.Equal(down.CheckedAt.Time) || found.SealedPassword == "" {
		t.Fatalf("after RecordBMCFound: got %+v, want the capabilities kept, the last reachability, the settings", found)
	}
	wantCode(t, s.RecordBMCFound(ctx(t), p2, h2, nil, reach), eim.ENOTFOUND)
	wantCode(t, s.RecordBMCFound(ctx(t), p1, h3, nil, reach), eim.ENOTFOUND)

	if err := s.DeleteBMC(ctx(t), p1, h2); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteBMC(ctx(t), p1, h2), eim.ENOTFOUND)

	// A BMC goes with its host, and with its project.
	if err := s.Update(ctx(t), p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, h1) }); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetBMC(ctx(t), p1, h1)
	wantCode(t, err, eim.ENOTFOUND)
	if err := s.PutBMC(ctx(t), &eim.BMC{Project: p2, HostID: other, Protocol: eim.BMCIPMI, Address: "a", Username: "u", SealedPassword: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProject(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListBMCs(ctx(t), p2); err != nil || len(list) != 0 {
		t.Fatalf("after its project's deletion: got %d BMCs (%v), want none", len(list), err)
	}

	// The feed: an event per put and delete, by host; none for what the
	// poll recorded, none for a BMC gone with its host or project.
	evs, err := s.Events(ctx(t), rev, 1000, eim.KindBMC)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	feed := map[string]string{}
	for _, ev := range evs {
		if ev.Kind != eim.KindBMC || (ev.Project != p1 && ev.Project != p2) {
			t.Fatalf("Events of kind bmc: got %+v", ev)
		}
		feed[ev.Project+"/"+ev.ID] += string(ev.Op) + " "
	}
	racers := "CREATED " + strings.Repeat("UPDATED ", 7) + "DELETED "
	want := map[string]string{p1 + "/" + h1: "CREATED UPDATED UPDATED ", p1 + "/" + h2: "CREATED DELETED ", p1 + "/" + h3: racers, p2 + "/" + other: "CREATED "}
	if len(feed) != len(want) {
		t.Fatalf("BMC events: got %q, want %q", feed, want)
	}
	for k, w := range want {
		if feed[k] != w {
			t.Fatalf("BMC events of %s: got %q, want %q", k, feed[k], w)
		}
	}
}
