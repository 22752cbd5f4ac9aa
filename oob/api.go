package oob

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/inventory"
)

func (s *Service) putBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	var in eim.BMCInput
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	b := &eim.BMC{Project: c.project, HostID: c.hostID, Protocol: eim.BMCProtocol(strings.ToUpper(strings.TrimSpace(in.Protocol))),
		Address: strings.TrimSpace(in.Address), SystemID: in.SystemID, Username: in.Username, CACert: in.CACert, Insecure: in.Insecure}
	pol, err := eim.ParsePowerPolicy("powerPolicy", in.PowerPolicy)
	if err != nil {
		return err
	}
	b.PowerPolicy = pol
	if err := b.Validate(); err != nil {
		return err
	}
	if in.Password != nil {
		if err := eim.CheckBMCPassword(b.Protocol, *in.Password); err != nil {
			return err
		}
		b.SealedPassword = s.o.Key.SealText(*in.Password, eim.BMCPasswordPurpose(c.project, c.hostID))
	}
	if err := s.o.Store.PutBMC(r.Context(), b); err != nil {
		return err
	}
	s.forget(c.project, c.hostID)
	// The host's bmcKind and bmcIp now (the feed's follower would too).
	if err := s.setHostBMC(r.Context(), c.project, c.hostID, controllerKind(b.Protocol), bmcHost(b.Address)); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, b.View())
	return nil
}

func (s *Service) getBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, b.View())
	return nil
}

func (s *Service) deleteBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.o.Store.DeleteBMC(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	s.forget(c.project, c.hostID)
	// The host's power is the host module's (in band) again.
	if err := s.setHostBMC(r.Context(), c.project, c.hostID, eim.BaremetalControllerKindUnspecified, ""); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{}) // {}, as the v1 API's deletes
	return nil
}

// JobsPath is the ServeMux path of a host's power jobs.
const JobsPath = BMCPath + "/jobs"

// PowerRequest is the body of POST …/bmc/jobs: a power change asked
// directly (the CLI's `eim host power … --boot`, the provisioning flow),
// with a boot override set first. The host's desiredPowerState becomes
// DesiredPowerState too.
type PowerRequest struct {
	DesiredPowerState eim.PowerState `json:"desiredPowerState"`
	// Boot is a boot override set before the power action: PXE, HTTP, CD,
	// DISK or BIOS ("" none); BootOnce for the next boot only. NETWORK is
	// a network-boot job (day0.go): Day 0 started through the BMC;
	// VIRTUAL_MEDIA the same from EIM's CD image as virtual media
	// (vmedia.go).
	Boot     string `json:"boot,omitempty"`
	BootOnce bool   `json:"bootOnce,omitempty"`
}

const (
	defaultPageSize = 20
	maxPageSize     = 100
	maxOffset       = 10000
)

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, eim.Errorf(eim.EINVALID, "%s: %q is not an integer", name, s)
	}
	if n < lo || n > hi {
		return 0, eim.Errorf(eim.EINVALID, "%s: %d is out of range [%d, %d]", name, n, lo, hi)
	}
	return n, nil
}

func (s *Service) listJobs(w http.ResponseWriter, r *http.Request, c *call) error {
	size, err := intParam(r, "pageSize", defaultPageSize, 1, maxPageSize)
	if err != nil {
		return err
	}
	off, err := intParam(r, "offset", 0, 0, maxOffset)
	if err != nil {
		return err
	}
	if _, err := s.host(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	jobs, total, err := s.o.Store.ListPowerJobs(r.Context(), c.project, c.hostID, size, off)
	if err != nil {
		return err
	}
	out := eim.PowerJobList{Jobs: []*eim.PowerJobView{}, TotalElements: total, HasNext: off+len(jobs) < total}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, j.View())
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

func jobID(r *http.Request) (string, error) {
	id := r.PathValue("jobId")
	return id, eim.CheckID(eim.KindPowerJob, "jobId", id)
}

func (s *Service) getJob(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := s.o.Store.GetPowerJob(r.Context(), c.project, c.hostID, id)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, j.View())
	return nil
}

func (s *Service) cancelJob(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := s.o.Store.CancelPowerJob(r.Context(), c.project, c.hostID, id, "cancelled by "+eim.ActorOf(r.Context()))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, j.View())
	return nil
}

func (s *Service) postJob(w http.ResponseWriter, r *http.Request, c *call) error {
	var in PowerRequest
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	if isNetbootRequest(in) {
		return s.postNetboot(w, r, c, in) // day0.go
	}
	if isMediaRequest(in) {
		return s.postMediaBoot(w, r, c, in) // vmedia.go
	}
	if !slices.Contains(in.DesiredPowerState.Values(), string(in.DesiredPowerState)) {
		return eim.Errorf(eim.EINVALID, "desiredPowerState: %q is not one of %v", in.DesiredPowerState, in.DesiredPowerState.Values())
	}
	var boot *Boot
	if t := strings.ToUpper(strings.TrimSpace(in.Boot)); t != "" {
		switch BootTarget(t) {
		case BootPXE, BootHTTP, BootCD, BootDisk, BootBIOS:
		default:
			return eim.Errorf(eim.EINVALID, "boot: %q is not one of PXE, HTTP, CD, DISK, BIOS", in.Boot)
		}
		boot = &Boot{Target: BootTarget(t), Once: in.BootOnce}
	} else if in.BootOnce {
		return eim.Errorf(eim.EINVALID, "bootOnce: only with boot")
	}
	if _, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	h, err := s.host(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	h.DesiredPowerState = in.DesiredPowerState
	// The host's desiredPowerState, the cancels of IMMEDIATE and the job:
	// one transaction.
	j, err := s.request(r.Context(), h, boot, true, func(tx eim.Tx) error {
		return inventory.SetDesiredPower(r.Context(), tx, &eim.Host{Meta: eim.Meta{ResourceID: c.hostID}}, in.DesiredPowerState)
	})
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, j.View())
	return nil
}
