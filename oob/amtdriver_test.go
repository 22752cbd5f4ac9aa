package oob_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/mpssim"
	"github.com/eimhq/eim/oob"
)

const amtGUID = "4c4c4544-005a-3510-8047-b4c04f564433"

func mpsServer(t *testing.T, lms bool) (*mpssim.MPS, oob.Target) {
	t.Helper()
	sim, err := mpssim.New(mpssim.Config{Username: "standalone", Password: bmcPassword,
		Devices: []mpssim.DeviceConfig{{GUID: amtGUID, LMS: lms}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(sim)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return sim, oob.Target{Protocol: "AMT", Address: srv.URL, SystemID: amtGUID, Username: "standalone", Password: bmcPassword, CABundle: ca}
}

var amtDriver = oob.NewAMTDriver(oob.AMTOptions{Timeout: 5 * time.Second})

func TestAMTDriver(t *testing.T) {
	ctx := context.Background()
	sim, target := mpsServer(t, false)
	c, err := amtDriver.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s, err := c.PowerState(ctx); err != nil || s != oob.PowerOff {
		t.Fatalf("power state: got %q, %v, want OFF", s, err)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []oob.Action{oob.ActionOn, oob.ActionForceOff, oob.ActionReset, oob.ActionPowerCycle}; !slices.Equal(caps.Actions, want) ||
		!slices.Equal(caps.BootTargets, []oob.BootTarget{oob.BootPXE, oob.BootCD, oob.BootBIOS}) || caps.VirtualMedia {
		t.Errorf("capabilities without LMS: %+v", caps)
	}
	if len(caps.ResetTypes) != 10 || caps.ResetTypes[0] != "Power cycle" {
		t.Errorf("the device's own names: %v", caps.ResetTypes)
	}
	// A one-time PXE boot goes with the power on: action 401.
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootPXE, Once: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Boot(ctx); b.Target != oob.BootPXE || !b.Once {
		t.Errorf("pending boot: %+v", b)
	}
	if err := c.Power(ctx, oob.ActionOn); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.PowerState(ctx); s != oob.PowerOn {
		t.Errorf("after on: %s", s)
	}
	if b, _ := c.Boot(ctx); b.Target != oob.BootNone {
		t.Errorf("the boot after use: %+v, want NONE", b)
	}
	// Reset to BIOS: 101; a plain reset: 10; off: 8.
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootBIOS, Once: true}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []oob.Action{oob.ActionReset, oob.ActionReset, oob.ActionForceOff} {
		if err := c.Power(ctx, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	var codes []int
	for _, a := range sim.Actions() {
		codes = append(codes, a.Action)
	}
	if !slices.Equal(codes, []int{401, 101, 10, 8}) {
		t.Errorf("actions sent: %v, want [401 101 10 8]", codes)
	}
	if b := sim.Boots(amtGUID); !slices.Equal(b, []string{"pxe", "bios", ""}) {
		t.Errorf("boots: %q", b)
	}
	if s, _ := c.PowerState(ctx); s != oob.PowerOff {
		t.Errorf("after off: %s", s)
	}
	// Without LMS there is no graceful off or sleep.
	err = c.Power(ctx, oob.ActionGracefulOff)
	if !errors.Is(err, oob.ErrUnsupported) || !strings.Contains(err.Error(), "Power up (2)") {
		t.Errorf("graceful off without LMS: got %v, want unsupported naming what is offered", err)
	}
	for _, b := range []oob.Boot{{Target: oob.BootPXE}, {Target: oob.BootHTTP, Once: true, URL: "http://x"}, {Target: oob.BootDisk, Once: true}} {
		if err := c.SetBoot(ctx, b); !errors.Is(err, oob.ErrUnsupported) {
			t.Errorf("SetBoot %+v: got %v, want unsupported", b, err)
		}
	}
	if err := c.InsertMedia(ctx, "http://x/a.iso"); !errors.Is(err, oob.ErrUnsupported) {
		t.Errorf("insert media: %v", err)
	}
	// States: sleep and hibernate as AMT reports them.
	for cim, want := range map[int]oob.PowerState{4: oob.PowerSleep, 7: oob.PowerHibernate, 6: oob.PowerOff, 9: oob.PowerPoweringOn, 2: oob.PowerOn} {
		sim.SetPowerState(amtGUID, cim)
		if s, err := c.PowerState(ctx); err != nil || s != want {
			t.Errorf("CIM state %d: got %q, %v, want %s", cim, s, err, want)
		}
	}
	sim.SetPowerState(amtGUID, 11)
	if _, err := c.PowerState(ctx); err == nil || !strings.Contains(err.Error(), "unknown CIM power state 11") {
		t.Errorf("state 11: %v", err)
	}
}

func TestAMTDriverErrors(t *testing.T) {
	ctx := context.Background()
	sim, target := mpsServer(t, true)
	bad := target
	bad.Password = "wrong"
	if _, err := amtDriver.Open(ctx, bad); !errors.Is(err, oob.ErrBadCredentials) || strings.Contains(err.Error(), bmcPassword) {
		t.Errorf("wrong password: %v", err)
	}
	bad = target
	bad.CABundle = nil
	if _, err := amtDriver.Open(ctx, bad); !errors.Is(err, oob.ErrBadCertificate) {
		t.Errorf("untrusted certificate: %v", err)
	}
	bad = target
	bad.SystemID = ""
	if _, err := amtDriver.Open(ctx, bad); err == nil || !strings.Contains(err.Error(), "GUID") {
		t.Errorf("no GUID: %v", err)
	}
	c, err := amtDriver.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sim.SetConnected(amtGUID, false)
	if _, err := c.PowerState(ctx); !errors.Is(err, oob.ErrUnreachable) {
		t.Errorf("disconnected device: %v, want unreachable", err)
	}
	sim.SetConnected(amtGUID, true)
	if err := c.Power(ctx, oob.ActionOn); err != nil {
		t.Fatal(err)
	}
	if err := c.Power(ctx, oob.ActionGracefulOff); err != nil { // soft off, with LMS
		t.Errorf("graceful off with LMS: %v", err)
	}
	if got := sim.Actions(); got[len(got)-1].Action != 12 {
		t.Errorf("graceful off sent %d, want 12", got[len(got)-1].Action)
	}
}
