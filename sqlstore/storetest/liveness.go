package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testLastSeen: upserts keep the newest time, unknown hosts are skipped
// without failing the batch, big batches span chunks, and a record goes
// with its host.
func testLastSeen(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	var hosts []*eim.Host
	for i := range 3 {
		hosts = append(hosts, create(t, s, p, &eim.Host{Name: fmt.Sprintf("n%d", i),
			UUID: fmt.Sprintf("6f1c3a52-8f0e-4b7a-9d2c-0e5b7a1c2d%02d", i)}).(*eim.Host))
	}
	t0 := time.UnixMilli(1_790_000_000_000)
	err := s.SaveLastSeen(c, []eim.LastSeen{
		{Project: p, HostID: hosts[0].ResourceID, At: t0},
		{Project: p, HostID: "host-0000dead", At: t0}, // never existed
		{Project: p, HostID: hosts[1].ResourceID, At: t0.Add(time.Second)},
	})
	if err != nil {
		t.Fatalf("SaveLastSeen: %v", err)
	}
	// Newer wins, older is ignored.
	err = s.SaveLastSeen(c, []eim.LastSeen{
		{Project: p, HostID: hosts[0].ResourceID, At: t0.Add(5 * time.Second)},
		{Project: p, HostID: hosts[1].ResourceID, At: t0.Add(-time.Minute)},
	})
	if err != nil {
		t.Fatalf("SaveLastSeen again: %v", err)
	}
	got := lastSeenOf(t, s, p)
	want := []eim.LastSeen{
		{Project: p, HostID: hosts[0].ResourceID, At: t0.Add(5 * time.Second)},
		{Project: p, HostID: hosts[1].ResourceID, At: t0.Add(time.Second)},
	}
	sort.Slice(want, func(i, j int) bool { return want[i].HostID < want[j].HostID })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Some hosts by ID, in one read.
	of, err := s.LastSeenOf(c, []string{hosts[1].ResourceID, hosts[2].ResourceID, "host-0000dead"})
	if err != nil {
		t.Fatalf("LastSeenOf: %v", err)
	}
	if len(of) != 1 || of[0].HostID != hosts[1].ResourceID || of[0].Project != p || of[0].At.UnixMilli() != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("LastSeenOf(%s, %s, unknown): got %v, want only %s at %v", hosts[1].ResourceID, hosts[2].ResourceID, of, hosts[1].ResourceID, t0.Add(time.Second))
	}
	if of, err := s.LastSeenOf(c, nil); err != nil || len(of) != 0 {
		t.Fatalf("LastSeenOf(none): got %v, %v; want nothing", of, err)
	}
	// The record goes with its host.
	if err := s.Update(c, p, func(tx eim.Tx) error { return tx.Delete(c, eim.KindHost, hosts[0].ResourceID) }); err != nil {
		t.Fatal(err)
	}
	if got := lastSeenOf(t, s, p); len(got) != 1 || got[0].HostID != hosts[1].ResourceID {
		t.Fatalf("after deleting %s: got %v", hosts[0].ResourceID, got)
	}

	// A batch larger than one statement.
	var many []eim.LastSeen
	for i := range 1200 {
		h := hosts[1+i%2]
		many = append(many, eim.LastSeen{Project: p, HostID: h.ResourceID, At: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if err := s.SaveLastSeen(c, many); err != nil {
		t.Fatalf("SaveLastSeen(1200): %v", err)
	}
	got = lastSeenOf(t, s, p)
	if len(got) != 2 || !(got[0].At.Equal(t0.Add(1199*time.Millisecond)) || got[1].At.Equal(t0.Add(1199*time.Millisecond))) {
		t.Fatalf("after a big batch: got %v", got)
	}
}

// lastSeenOf returns project p's records, by host ID.
func lastSeenOf(t *testing.T, s eim.Store, p string) []eim.LastSeen {
	t.Helper()
	all, err := s.LastSeen(ctx(t))
	if err != nil {
		t.Fatalf("LastSeen: %v", err)
	}
	var out []eim.LastSeen
	for _, ls := range all {
		if ls.Project == p {
			ls.At = time.UnixMilli(ls.At.UnixMilli())
			out = append(out, ls)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].HostID < out[j].HostID })
	return out
}

// testHardwareRoundTrip: a host's hardware children survive the store.
func testHardwareRoundTrip(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	ts := eim.Timestamps{CreatedAt: eim.NewTime(time.UnixMilli(1_790_000_000_000)), UpdatedAt: eim.NewTime(time.UnixMilli(1_790_000_001_000))}
	h := &eim.Host{Name: "hw", UUID: "6f1c3a52-8f0e-4b7a-9d2c-0e5b7a1c2eee", HardwareDigest: "d1",
		HostStorages: eim.List[eim.HostStorage]{{DeviceName: "nvme0n1", Serial: "S1", CapacityBytes: 1 << 40, Timestamps: ts}},
		HostNics: eim.List[eim.HostNic]{{DeviceName: "eth0", MacAddr: "52:54:00:12:34:56", Mtu: 1500,
			LinkState:   eim.NicLinkState{Type: eim.LinkStateUp, Timestamps: ts},
			IPAddresses: eim.List[eim.IPAddress]{{ResourceID: "ipaddr-0a0b0c0d", Address: "192.0.2.10/24", Status: eim.IPAddressStatusConfigured, ConfigMethod: eim.IPConfigDynamic, Timestamps: ts}},
			Timestamps:  ts}},
		HostUsbs: eim.List[eim.HostUsb]{{IDVendor: "1d6b", IDProduct: "0002", Bus: 1, Addr: 1, Timestamps: ts}},
		HostGpus: eim.List[eim.HostGpu]{{PciID: "0000:00:02.0", Capabilities: eim.List[string]{"vga"}, Timestamps: ts}},
	}
	h = create(t, s, p, h).(*eim.Host)
	var got *eim.Host
	err := s.View(c, p, func(tx eim.Tx) error {
		r, err := tx.Get(c, eim.KindHost, h.ResourceID)
		if err == nil {
			got = r.(*eim.Host)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.HostStorages, h.HostStorages) || !reflect.DeepEqual(got.HostNics, h.HostNics) ||
		!reflect.DeepEqual(got.HostUsbs, h.HostUsbs) || !reflect.DeepEqual(got.HostGpus, h.HostGpus) || got.HardwareDigest != "d1" {
		t.Fatalf("got %+v %+v %+v %+v %q,\nwant %+v %+v %+v %+v", got.HostStorages, got.HostNics, got.HostUsbs, got.HostGpus, got.HardwareDigest,
			h.HostStorages, h.HostNics, h.HostUsbs, h.HostGpus)
	}
}
