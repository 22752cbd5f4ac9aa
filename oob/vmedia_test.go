package oob_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// Virtual-media jobs (oob/vmedia.go) on the fake BMC given a virtual CD;
// the real one (the Redfish test BMC inserting the image into a VM's CD
// drive) is in cmd/eim's TestVMDay0BMC.

// mediaBMC is the fake BMC with a virtual CD.
type mediaBMC struct {
	*fakeBMC
	mmu      sync.Mutex
	image    string
	inserts  []string
	ejects   int
	ejectErr error // EjectMedia's answer (nil: ejected)
}

func (m *mediaBMC) Open(context.Context, oob.Target) (oob.Conn, error) { return m, nil }

func (m *mediaBMC) InsertMedia(_ context.Context, url string) error {
	m.mmu.Lock()
	defer m.mmu.Unlock()
	m.image = url
	m.inserts = append(m.inserts, url)
	return nil
}

func (m *mediaBMC) EjectMedia(context.Context) error {
	m.mmu.Lock()
	defer m.mmu.Unlock()
	m.ejects++
	if m.ejectErr != nil {
		return m.ejectErr
	}
	m.image = ""
	return nil
}

func (m *mediaBMC) inserted() string {
	m.mmu.Lock()
	defer m.mmu.Unlock()
	return m.image
}

const isoURL = "http://10.0.0.1:8080/boot/artifacts/eim-microos.iso"

// mediaJobs is newJobs with the BMC m and the server's CD image URL.
func mediaJobs(t *testing.T, e *env, m *mediaBMC, tweak func(*oob.Options)) *jobs {
	t.Helper()
	return newJobs(t, e, m.fakeBMC, func(o *oob.Options) {
		o.Drivers = map[eim.BMCProtocol]oob.Driver{eim.BMCIPMI: m}
		o.VirtualMediaURL = isoURL
		if tweak != nil {
			tweak(o)
		}
	})
}

// TestMediaBootInsertsBootsEjects: the image is inserted, a one-time CD
// boot set and read back, the machine powered on; once the node has
// called home the image is ejected and the override cleared.
func TestMediaBootInsertsBootsEjects(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		m := &mediaBMC{fakeBMC: newFake(oob.PowerOff)}
		j := mediaJobs(t, e, m, nil)
		in := e.addInstance(t, e.hostA)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "VIRTUAL_MEDIA"})
		got := j.waitStep(t, id, 3)
		if k := stepKinds(got); k != "INSERT_MEDIA,SET_BOOT,BOOT_POWER,CALL_HOME,EJECT_MEDIA,CLEAR_BOOT" {
			t.Fatalf("steps %s, want a virtual-media job's", k)
		}
		if m.inserted() != isoURL || got.Steps[0].Image != isoURL {
			t.Fatalf("inserted %q (step's image %q), want %s", m.inserted(), got.Steps[0].Image, isoURL)
		}
		if f := m.fakeBMC; f.sent(oob.ActionOn) != 1 {
			t.Fatalf("sends %v, want one power-on", f.sends)
		}
		j.callHome(t, in, got.Steps[2].SentAt.Time)
		done := j.wait(t, id, eim.PowerJobSucceeded)
		m.mmu.Lock()
		ejects := m.ejects
		m.mmu.Unlock()
		if m.inserted() != "" || ejects != 1 {
			t.Errorf("after the job: image %q, %d ejects; want it ejected once", m.inserted(), ejects)
		}
		m.mu.Lock()
		boots := append([]oob.Boot(nil), m.boots...)
		m.mu.Unlock()
		if len(boots) != 2 || boots[0] != (oob.Boot{Target: oob.BootCD, Once: true}) || boots[1].Target != oob.BootNone {
			t.Fatalf("overrides set %+v, want a one-time CD, then none", boots)
		}
		for _, s := range done.Steps {
			if !s.Done {
				t.Errorf("step %s not done: %+v", s.Kind, s)
			}
		}
		if h := j.host(t); h.DesiredPowerState != eim.PowerStateOn || h.CurrentPowerState != eim.PowerStateOn {
			t.Errorf("host desired %s current %s, want ON and ON", h.DesiredPowerState, h.CurrentPowerState)
		}
	})
}

// TestMediaBootWithoutVirtualMedia: a BMC without virtual media (the
// fake's IPMI answer) fails the job at once, naming why and what to do
// instead; nothing else is sent.
func TestMediaBootWithoutVirtualMedia(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, func(o *oob.Options) { o.VirtualMediaURL = isoURL })
		run(t, j.svc.Work)
		start := time.Now()
		id := j.post(t, map[string]any{"boot": "virtual_media", "desiredPowerState": "POWER_STATE_ON"})
		got := j.wait(t, id, eim.PowerJobFailed)
		if !strings.Contains(got.LastError, "no virtual media") || !strings.Contains(got.LastError, "boot NETWORK") {
			t.Errorf("lastError %q: want it to say the BMC has no virtual media and to boot from the network", got.LastError)
		}
		if strings.Contains(got.LastError, "eject") || strings.Contains(got.LastError, "override") {
			t.Errorf("lastError %q: nothing was inserted or set, nothing to undo", got.LastError)
		}
		f.mu.Lock()
		if len(f.sends) != 0 || len(f.boots) != 0 {
			t.Errorf("sends %v, overrides %v: want none", f.sends, f.boots)
		}
		f.mu.Unlock()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("failed after %s, want at once", d)
		}
	})
}

// TestMediaBootFailureEjects: no call-home in time: the job fails, and
// the image is ejected and the override cleared first, as lastError says;
// an eject the BMC refuses is said too.
func TestMediaBootFailureEjects(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		m := &mediaBMC{fakeBMC: newFake(oob.PowerOn)}
		j := mediaJobs(t, e, m, func(o *oob.Options) { o.CallHomeTimeout = 300 * time.Millisecond })
		e.addInstance(t, e.hostA)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "VIRTUAL_MEDIA"})
		got := j.wait(t, id, eim.PowerJobFailed)
		if !strings.Contains(got.LastError, "did not call home") || !strings.Contains(got.LastError, "the virtual CD was ejected; the boot override was cleared") {
			t.Errorf("lastError %q: want the call-home's failure, the eject and the clear", got.LastError)
		}
		m.mu.Lock()
		override := m.boot.Target
		m.mu.Unlock()
		if m.inserted() != "" || override != oob.BootNone {
			t.Errorf("after the failure: image %q, override %s; want none", m.inserted(), override)
		}
		if m.sent(oob.ActionReset) != 1 {
			t.Errorf("sends %v: want one reset of the running machine", m.sends)
		}

		m.mmu.Lock()
		m.ejectErr = &oob.Error{Kind: oob.Failed, Op: "eject media", Detail: "the BMC said no"}
		m.mmu.Unlock()
		id = j.post(t, map[string]any{"boot": "VIRTUAL_MEDIA"})
		got = j.wait(t, id, eim.PowerJobFailed)
		if !strings.Contains(got.LastError, "the virtual CD was not ejected (eject media: failed: the BMC said no); the boot override was cleared") {
			t.Errorf("lastError %q: want the refused eject said", got.LastError)
		}
	})
}

// TestMediaBootRefused: what POST refuses.
func TestMediaBootRefused(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		m := &mediaBMC{fakeBMC: newFake(oob.PowerOff)}
		j := newJobs(t, e, m.fakeBMC, nil) // no CD image URL
		for _, c := range []struct {
			body map[string]any
			code int
			want string
		}{
			{map[string]any{"boot": "VIRTUAL_MEDIA"}, 409, "--oob-virtual-media-url"},
		} {
			code, out := j.do("admin", "POST", bmcPath("a", j.hostA)+"/jobs", c.body)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("POST %v: %d %s, want %d naming %q", c.body, code, out, c.code, c.want)
			}
		}
		j2 := mediaJobs(t, e, m, nil)
		for _, c := range []struct {
			body map[string]any
			want string
		}{
			{map[string]any{"boot": "VIRTUAL_MEDIA", "desiredPowerState": "POWER_STATE_OFF"}, "leaves the machine on"},
			{map[string]any{"boot": "VIRTUAL_MEDIA", "bootOnce": true}, "always for the next boot only"},
		} {
			code, out := j2.do("admin", "POST", bmcPath("a", j2.hostA)+"/jobs", c.body)
			if code != 400 || !strings.Contains(out, c.want) {
				t.Errorf("POST %v: %d %s, want 400 naming %q", c.body, code, out, c.want)
			}
		}
	})
}

// TestMediaBootCancelledEjects: a virtual-media job cancelled while it
// waits for the node ejects its image and clears its override.
func TestMediaBootCancelledEjects(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		m := &mediaBMC{fakeBMC: newFake(oob.PowerOff)}
		j := mediaJobs(t, e, m, nil)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "VIRTUAL_MEDIA"})
		j.waitStep(t, id, 3)
		if m.inserted() != isoURL {
			t.Fatalf("before the cancel: image %q, want %s", m.inserted(), isoURL)
		}
		e.want("admin", "POST", bmcPath("a", e.hostA)+"/jobs/"+id+"/cancel", nil, 200, "CANCELLED")
		deadline := time.Now().Add(20 * time.Second)
		for {
			m.mu.Lock()
			b := m.boot
			m.mu.Unlock()
			if b.Target == oob.BootNone && m.inserted() == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the cancel: override %+v, image %q; want none and none", b, m.inserted())
			}
			time.Sleep(10 * time.Millisecond) // a poll's pace
		}
	})
}
