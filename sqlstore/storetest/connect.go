package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testConnectCredentials: a credential is found by ID with its hash and
// times; a new one with others expires the cluster's others (and only
// theirs); the list leaves out expired ones; an unknown ID is ENOTFOUND.
func testConnectCredentials(t *testing.T, s eim.Store) {
	c := ctx(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(id, project, cluster string, created time.Time) *eim.ConnectCredential {
		return &eim.ConnectCredential{ID: id, Project: project, Cluster: cluster, Hash: []byte{1, 2, byte(len(id))},
			Created: created, Expires: created.Add(time.Hour)}
	}
	a := mk("ct-a", "p1", "edge", now)
	if err := s.CreateConnectCredential(c, a, nil); err != nil {
		t.Fatal(err)
	}
	other := mk("ct-o", "p1", "other", now)
	if err := s.CreateConnectCredential(c, other, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindConnectCredential(c, "ct-a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Project != "p1" || got.Cluster != "edge" || !bytes.Equal(got.Hash, a.Hash) || !got.Created.Equal(a.Created) || !got.Expires.Equal(a.Expires) {
		t.Fatalf("FindConnectCredential: got %+v, want %+v", got, a)
	}
	_, err = s.FindConnectCredential(c, "ct-none")
	wantCode(t, err, eim.ENOTFOUND)
	wantCode(t, s.CreateConnectCredential(c, &eim.ConnectCredential{ID: "x"}, nil), eim.EINVALID)

	// A rotation: ct-a expires at the grace, ct-o of another cluster not.
	grace := now.Add(10 * time.Minute)
	b := mk("ct-b", "p1", "edge", now.Add(time.Second))
	if err := s.CreateConnectCredential(c, b, &grace); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FindConnectCredential(c, "ct-a"); !got.Expires.Equal(grace) {
		t.Fatalf("rotated credential expires %v, want %v", got.Expires, grace)
	}
	if got, _ := s.FindConnectCredential(c, "ct-b"); !got.Expires.Equal(b.Expires) {
		t.Fatalf("new credential expires %v, want %v", got.Expires, b.Expires)
	}
	if got, _ := s.FindConnectCredential(c, "ct-o"); !got.Expires.Equal(other.Expires) {
		t.Fatalf("another cluster's credential expires %v, want %v (untouched)", got.Expires, other.Expires)
	}
	list, err := s.ListConnectCredentials(c, "p1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range list {
		ids = append(ids, l.ID)
	}
	if want := []string{"ct-a", "ct-b", "ct-o"}; !equalStrings(ids, want) {
		t.Fatalf("ListConnectCredentials: got %v, want %v", ids, want)
	}
	// A revocation: every credential of the cluster expires; the list
	// leaves them out.
	if err := s.ExpireConnectCredentials(c, "p1", "edge", now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	list, err = s.ListConnectCredentials(c, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "ct-o" {
		t.Fatalf("after revoking edge's: got %d credentials, want only ct-o", len(list))
	}
	if list, _ := s.ListConnectCredentials(c, "p2"); len(list) != 0 {
		t.Fatalf("another project's list: got %d, want 0", len(list))
	}
}

// testTunnels: the registry keeps one tunnel per cluster, the newest
// holder's; a touch by a replica that does not hold it changes nothing
// and says so; a delete by another replica leaves the holder's.
func testTunnels(t *testing.T, s eim.Store) {
	c := ctx(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	t1 := &eim.Tunnel{Project: "p1", Cluster: "edge", Replica: "r1", Address: "http://10.0.0.1:8080", AgentVersion: "v1", Connected: now, LastSeen: now}
	if err := s.SaveTunnel(c, t1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTunnel(c, &eim.Tunnel{Project: "p2", Cluster: "edge", Replica: "r1", Address: "a", Connected: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindTunnel(c, "p1", "edge")
	if err != nil {
		t.Fatal(err)
	}
	if *got != *t1 {
		t.Fatalf("FindTunnel: got %+v, want %+v", got, t1)
	}
	held, err := s.TouchTunnel(c, "p1", "edge", "r1", now.Add(time.Second), 1500*time.Microsecond)
	if err != nil || !held {
		t.Fatalf("TouchTunnel by the holder: %v, %v; want held", held, err)
	}
	if got, _ := s.FindTunnel(c, "p1", "edge"); got.RTT != 1500*time.Microsecond || !got.LastSeen.Equal(now.Add(time.Second)) {
		t.Fatalf("after the touch: rtt %v, lastSeen %v", got.RTT, got.LastSeen)
	}
	// The agent reconnects to r2: r2 holds it; r1's touch and delete miss.
	t2 := &eim.Tunnel{Project: "p1", Cluster: "edge", Replica: "r2", Address: "http://10.0.0.2:8080", AgentVersion: "v2", Connected: now.Add(2 * time.Second), LastSeen: now.Add(2 * time.Second)}
	if err := s.SaveTunnel(c, t2); err != nil {
		t.Fatal(err)
	}
	if held, err := s.TouchTunnel(c, "p1", "edge", "r1", now.Add(3*time.Second), time.Millisecond); err != nil || held {
		t.Fatalf("TouchTunnel by the former holder: %v, %v; want not held", held, err)
	}
	if err := s.DeleteTunnel(c, "p1", "edge", "r1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FindTunnel(c, "p1", "edge"); err != nil || got.Replica != "r2" || got.Address != t2.Address {
		t.Fatalf("after r1's delete: got %+v, %v; want r2's", got, err)
	}
	all, err := s.ListTunnels(c, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("ListTunnels(all): got %d, %v; want 2", len(all), err)
	}
	if ps, err := s.ListTunnels(c, "p2"); err != nil || len(ps) != 1 || ps[0].Project != "p2" {
		t.Fatalf("ListTunnels(p2): got %v, %v", ps, err)
	}
	if err := s.DeleteTunnel(c, "p1", "edge", "r2"); err != nil {
		t.Fatal(err)
	}
	_, err = s.FindTunnel(c, "p1", "edge")
	wantCode(t, err, eim.ENOTFOUND)
	wantCode(t, s.SaveTunnel(c, &eim.Tunnel{Project: "p1"}), eim.EINVALID)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
