package oob

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/inventory"
)

// Day 0 from virtual media: for a site without PXE, a virtual-media job
// has the BMC insert EIM's micro-OS CD image (Options.VirtualMediaURL,
// the server's /boot/artifacts/eim-microos.iso: provisioning/bootcd.go)
// as a virtual CD and boots the machine from it once. Its steps:
//
//  1. INSERT_MEDIA: the image inserted (Redfish VirtualMedia.InsertMedia,
//     or a PATCH of Image on older services; the BMC fetches the URL);
//     a BMC without virtual media (IPMI, AMT through an MPS, a Redfish
//     system without a virtual CD) fails the job here, at once;
//  2. SET_BOOT: a one-time boot from the CD, read back;
//  3. BOOT_POWER, CALL_HOME: as a network-boot job's (day0.go);
//  4. EJECT_MEDIA: the image ejected;
//  5. CLEAR_BOOT: the override cleared, read back as none.
//
// A job failing or cancelled after its image was inserted or its override
// set ejects the image and clears the override before it ends, as well
// as it can, and says how that went.

// Step kinds of virtual-media jobs.
const (
	StepInsertMedia = "INSERT_MEDIA"
	StepEjectMedia  = "EJECT_MEDIA"
)

// BootVirtualMedia is the boot of a virtual-media job in the API's POST.
const BootVirtualMedia = "VIRTUAL_MEDIA"

// MediaPlan returns the steps of a virtual-media job booting the CD image
// at image; callHome bounds the wait for the node.
func MediaPlan(image string, callHome time.Duration) []eim.PowerStep {
	return []eim.PowerStep{
		{Kind: StepInsertMedia, Image: image},
		{Kind: eim.PowerStepSetBoot, Boot: string(BootCD), Once: true},
		{Kind: StepBootPower},
		{Kind: StepCallHome, TimeoutMs: callHome.Milliseconds()},
		{Kind: StepEjectMedia},
		{Kind: StepClearBoot, Boot: string(BootNone)},
	}
}

// IsMediaBoot reports whether j is a virtual-media job.
func IsMediaBoot(j *eim.PowerJob) bool {
	return slices.ContainsFunc(j.Steps, func(s eim.PowerStep) bool { return s.Kind == StepInsertMedia })
}

// isMediaRequest reports whether a POST's boot asks for a virtual-media job.
func isMediaRequest(in PowerRequest) bool {
	return strings.EqualFold(strings.TrimSpace(in.Boot), BootVirtualMedia)
}

// postMediaBoot answers POST …/bmc/jobs {"boot":"VIRTUAL_MEDIA"}: boot
// this host once from EIM's micro-OS CD image through its BMC's virtual
// media. As a network boot's, the desiredPowerState, when given, must be
// ON; the host's becomes ON.
func (s *Service) postMediaBoot(w http.ResponseWriter, r *http.Request, c *call, in PowerRequest) error {
	if in.DesiredPowerState != "" && in.DesiredPowerState != eim.PowerStateOn {
		return eim.Errorf(eim.EINVALID, "desiredPowerState: a virtual-media boot leaves the machine on: %s or nothing, not %q", eim.PowerStateOn, in.DesiredPowerState)
	}
	if in.BootOnce {
		return eim.Errorf(eim.EINVALID, "bootOnce: a virtual-media boot is always for the next boot only; leave it out")
	}
	if s.o.VirtualMediaURL == "" {
		return eim.Errorf(eim.EPRECONDITION, "boot %s: the server has no CD image URL for BMCs (--oob-virtual-media-url, e.g. http://eim.example.com:8080/boot/artifacts/eim-microos.iso)", BootVirtualMedia)
	}
	if _, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	h, err := s.host(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	if h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted {
		return eim.Errorf(eim.EPRECONDITION, "host %s is %s: it is not booted for provisioning", c.hostID, h.DesiredState)
	}
	steps := MediaPlan(s.o.VirtualMediaURL, s.o.CallHomeTimeout)
	j, err := s.enqueue(r.Context(), h, eim.PowerStateOn, steps, s.o.JobTimeout+s.o.CallHomeTimeout, func(tx eim.Tx) error {
		return inventory.SetDesiredPower(r.Context(), tx, &eim.Host{Meta: eim.Meta{ResourceID: c.hostID}}, eim.PowerStateOn)
	}, false)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, j.View())
	return nil
}

// mediaStep carries out the steps a virtual-media job has beyond a
// network-boot job's (INSERT_MEDIA, EJECT_MEDIA) and its SET_BOOT, with
// the clean-up of a failure or a cancel.
func (r *run) mediaStep(ctx context.Context, st *eim.PowerStep) error {
	var err error
	switch st.Kind {
	case StepInsertMedia:
		err = r.media(ctx, st, true)
	case StepEjectMedia:
		err = r.media(ctx, st, false)
	default:
		err = r.setBoot(ctx, st)
	}
	return r.undoOnFailure(ctx, err)
}

// media inserts (or ejects) the step's image, tried again on failures
// that may pass, at most MaxSends times.
func (r *run) media(ctx context.Context, st *eim.PowerStep, insert bool) error {
	what := "eject the virtual CD"
	if insert {
		what = "insert " + st.Image + " as the virtual CD"
	}
	for {
		if err := r.late(); err != nil {
			return err
		}
		if st.Sends >= r.s.o.MaxSends {
			return fail("%s: not done after %d tries: %s", what, st.Sends, r.j.LastError)
		}
		st.Sends++
		st.SentAt = eim.NewTime(time.Now())
		if err := r.save(ctx); err != nil {
			return err
		}
		var err error
		if insert {
			err = r.conn.InsertMedia(ctx, st.Image)
		} else {
			err = r.conn.EjectMedia(ctx)
		}
		r.s.reached(ctx, r.j.Project, r.j.HostID, err)
		switch {
		case err == nil:
			st.Done = true
			if insert {
				st.Note = "inserted as the virtual CD"
			} else {
				st.Note = "ejected"
			}
			return nil
		case insert && KindOf(err) == Unsupported:
			return fail("%v: this BMC has no virtual media to boot EIM's CD image from; boot the host from the network instead (boot %s)", err, BootNetwork)
		case permanent(err):
			return fail("%v", err)
		}
		r.j.LastError = err.Error()
		if err := r.wait(ctx, r.s.o.ConfirmEvery); err != nil {
			return err
		}
	}
}

// undoMedia ejects a virtual-media job's image and clears its override
// after a failure or a cancel, each when its step was sent, and says how
// that went ("" when nothing was to be undone).
func (r *run) undoMedia(ctx context.Context) string {
	if r.conn == nil {
		return ""
	}
	sent := func(kind string) bool {
		i := slices.IndexFunc(r.j.Steps, func(s eim.PowerStep) bool { return s.Kind == kind })
		return i >= 0 && r.j.Steps[i].Sends > 0
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var out []string
	if sent(StepInsertMedia) {
		if err := r.conn.EjectMedia(cctx); err == nil {
			out = append(out, "the virtual CD was ejected")
		} else if KindOf(err) != Unsupported { // nothing was inserted
			out = append(out, fmt.Sprintf("the virtual CD was not ejected (%v)", err))
		}
	}
	if sent(eim.PowerStepSetBoot) {
		out = append(out, strings.TrimPrefix(r.clearOverride(cctx), "; "))
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}
