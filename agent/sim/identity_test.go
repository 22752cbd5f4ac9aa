package sim_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent/sim"
)

var (
	uuidRE   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	serialRE = regexp.MustCompile(`^[A-Za-z0-9]{5,20}$`)
)

func TestGenerate(t *testing.T) {
	ids := sim.Generate(5000, 42)
	if len(ids) != 5000 {
		t.Fatalf("got %d identities, want 5000", len(ids))
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if !uuidRE.MatchString(id.UUID) {
			t.Errorf("identity %d: UUID %q is not a version-4 RFC 4122 UUID", i, id.UUID)
		}
		if !serialRE.MatchString(id.Serial) {
			t.Errorf("identity %d: serial %q does not match %s", i, id.Serial, serialRE)
		}
		for _, k := range []string{id.UUID, id.Serial, id.Hostname, id.MAC, id.Addr} {
			if k == "" || seen[k] {
				t.Fatalf("identity %d: %q empty or repeated", i, k)
			}
			seen[k] = true
		}
	}
	if ids[0].Hostname != "sim-00001" || ids[0].MAC != "02:5e:00:00:00:01" || ids[0].Addr != "10.0.0.1/8" {
		t.Errorf("first identity: got %+v", ids[0])
	}
	again := sim.Generate(3, 42)
	other := sim.Generate(3, 43)
	if again[2] != ids[2] {
		t.Errorf("same seed: got %+v, want %+v", again[2], ids[2])
	}
	if other[0].UUID == ids[0].UUID {
		t.Errorf("different seeds gave the same UUID %s", ids[0].UUID)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	ids := sim.Generate(10, 1)
	var b bytes.Buffer
	if err := sim.WriteCSV(&b, ids); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "uuid,serial\n") {
		t.Errorf("CSV: got %q, want a uuid,serial header", b.String()[:20])
	}
	got, err := sim.ReadCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("read %d identities, want %d", len(got), len(ids))
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Errorf("identity %d: got %+v, want %+v", i, got[i], ids[i])
		}
	}
}

func TestReadCSV(t *testing.T) {
	good := "# OEM batch 7\n9B1C0A8E-3F5D-4B7A-9C2E-1D4F6A8B0C2E,SN12345\n\n,SN99999\n4c4c4544-0042-3510-8052-b4c04f4e4d32\n"
	ids, err := sim.ReadCSV(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.Identity{
		{UUID: "9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e", Serial: "SN12345", Hostname: "sim-00001"},
		{Serial: "SN99999", Hostname: "sim-00002"},
		{UUID: "4c4c4544-0042-3510-8052-b4c04f4e4d32", Hostname: "sim-00003"},
	}
	if len(ids) != len(want) {
		t.Fatalf("got %d identities, want %d: %+v", len(ids), len(want), ids)
	}
	for i, w := range want {
		if ids[i].UUID != w.UUID || ids[i].Serial != w.Serial || ids[i].Hostname != w.Hostname || ids[i].MAC == "" {
			t.Errorf("identity %d: got %+v, want %+v with a MAC", i, ids[i], w)
		}
	}
	// The bulk import file of "eim host import": columns by name, the rest
	// ignored.
	bulk := "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill\n" +
		"2500JF3,4C4C4544-2046-5310-8052-CAC04F515233,\"Ubuntu 24.04\",plant,true,,a=b\n" +
		"ICW814D\n" +
		",4c4c4544-0946-5310-8052-cac04f515233,os-00000001\n"
	ids, err = sim.ReadCSV(strings.NewReader(bulk))
	if err != nil {
		t.Fatalf("bulk import file: %v", err)
	}
	if len(ids) != 3 || ids[0].UUID != "4c4c4544-2046-5310-8052-cac04f515233" || ids[0].Serial != "2500JF3" ||
		ids[1].UUID != "" || ids[1].Serial != "ICW814D" || ids[2].UUID != "4c4c4544-0946-5310-8052-cac04f515233" || ids[2].Serial != "" {
		t.Errorf("bulk import file: got %+v", ids)
	}
	for name, in := range map[string]string{
		"header without serial": "UUID,OSProfile\n9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e,x\n",
		"bad uuid":              "not-a-uuid,SN12345\n",
		"bad serial":            "9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e,SN-1\n",
		"both empty":            "uuid,serial\n,\n",
		"three fields":          "9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e,SN12345,x\n",
		"repeated uuid":         "9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e,SN12345\n9B1C0A8E-3F5D-4B7A-9C2E-1D4F6A8B0C2E,SN12346\n",
		"repeated serial":       ",SN12345\n,SN12345\n",
	} {
		if _, err := sim.ReadCSV(strings.NewReader(in)); err == nil {
			t.Errorf("%s: got no error for %q", name, in)
		}
	}
}
