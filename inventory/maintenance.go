package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// OS update policies and runs.
//
// The API creates, reads and deletes policies (they cannot be changed, as
// in the original) and reads and deletes runs. The maintenance module
// writes runs and instances' update status with the functions below, each
// inside a transaction of its own (eim.Store.Update, or a batcher's), so
// that they compose with its other writes: writers are partitioned, the
// API never writes these fields and the module never writes desired ones.

// checkPolicyRefs checks a new policy's target OS: it exists in the
// project and is not a mutable OS (those are updated by packages, which a
// target OS does not name).
func checkPolicyRefs(ctx context.Context, tx eim.Tx, p *eim.OSUpdatePolicy) error {
	if p.TargetOsID == "" {
		return nil
	}
	r, err := exists(ctx, tx, eim.KindOS, "targetOsId", p.TargetOsID)
	if err != nil {
		return err
	}
	if o := r.(*eim.OS); o.OsType == "OS_TYPE_MUTABLE" {
		return eim.Errorf(eim.EINVALID, "targetOsId: OS %s is mutable (updated by packages); a target OS is for immutable, image-based OSes "+
			"— give updateSources, updatePackages or updateKernelCommand instead", o.ResourceID)
	}
	return nil
}

// maxStatusText is the longest status text of the API's schemas.
const maxStatusText = eim.MaxStatusText

// OSUpdatePolicyOf returns the OS update policy instance in names, with
// its target OS filled in (TargetOs), or nil when it names none. It is how
// the maintenance module reads what to apply to an instance.
func OSUpdatePolicyOf(ctx context.Context, tx eim.Tx, in *eim.Instance) (*eim.OSUpdatePolicy, error) {
	if in.OSUpdatePolicyID == "" {
		return nil, nil
	}
	r, err := tx.Get(ctx, eim.KindOSUpdatePolicy, in.OSUpdatePolicyID)
	if err != nil {
		return nil, fmt.Errorf("OS update policy of %s: %w", in.ResourceID, err)
	}
	out, err := expandOne(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	return out.(*eim.OSUpdatePolicy), nil
}

// CreateOSUpdateRun records the start of an update of run.InstanceID: the
// maintenance module's side of the runs. The caller sets InstanceID and,
// when the update applies one, AppliedPolicyID (usually the instance's
// osUpdatePolicyID); the status fields default to "Updating"
// (STATUS_INDICATION_IN_PROGRESS), StartTime and StatusTimestamp to now,
// Name to "OS update <time>". HostID is the instance's host. The instance
// must exist and not be being deleted, the policy must exist; run is
// validated and, on success, holds the stored run (its ID).
func CreateOSUpdateRun(ctx context.Context, tx eim.Tx, run *eim.OSUpdateRun, now time.Time) error {
	if run.InstanceID == "" {
		return eim.Errorf(eim.EINVALID, "instance: is required")
	}
	if err := eim.CheckID(eim.KindInstance, "instance", run.InstanceID); err != nil {
		return err
	}
	r, err := exists(ctx, tx, eim.KindInstance, "instance", run.InstanceID)
	if err != nil {
		return err
	}
	in := r.(*eim.Instance)
	if in.DesiredState == eim.InstanceStateDeleted {
		return eim.Errorf(eim.EPRECONDITION, "instance: instance %s is being deleted", in.ResourceID)
	}
	if run.AppliedPolicyID != "" {
		if err := eim.CheckID(eim.KindOSUpdatePolicy, "appliedPolicy", run.AppliedPolicyID); err != nil {
			return err
		}
		if _, err := exists(ctx, tx, eim.KindOSUpdatePolicy, "appliedPolicy", run.AppliedPolicyID); err != nil {
			return err
		}
	}
	run.ResourceID = ""
	run.HostID = in.HostID
	sec := uint64(now.Unix())
	if run.StartTime == 0 {
		run.StartTime = sec
	}
	if run.StatusTimestamp == 0 {
		run.StatusTimestamp = run.StartTime
	}
	if run.Status == "" && run.StatusIndicator == "" {
		run.Status, run.StatusIndicator = eim.UpdateStatusUpdating, eim.StatusInProgress
	}
	if run.Name == "" {
		run.Name = "OS update " + time.Unix(int64(run.StartTime), 0).UTC().Format(time.RFC3339)
	}
	if err := eim.Validate(run); err != nil {
		return err
	}
	normalizeEnums(run)
	return tx.Create(ctx, run)
}

// UpdateOSUpdateRun writes the maintenance module's fields of an existing
// run from run: status, statusIndicator, statusDetails, statusTimestamp,
// endTime, name and description (a run ends when endTime is set). Its
// instance, host, applied policy and startTime stay as stored. Nothing is
// written when nothing changes. On success run holds the stored run.
func UpdateOSUpdateRun(ctx context.Context, tx eim.Tx, run *eim.OSUpdateRun) error {
	if err := eim.CheckID(eim.KindOSUpdateRun, "resourceId", run.ResourceID); err != nil {
		return err
	}
	r, err := tx.Get(ctx, eim.KindOSUpdateRun, run.ResourceID)
	if err != nil {
		return err
	}
	old := r.(*eim.OSUpdateRun)
	nr := clone(old)
	nr.Name, nr.Description = run.Name, run.Description
	nr.Status, nr.StatusIndicator, nr.StatusDetails = run.Status, run.StatusIndicator, run.StatusDetails
	nr.StatusTimestamp, nr.EndTime = run.StatusTimestamp, run.EndTime
	if err := eim.Validate(nr); err != nil {
		return err
	}
	normalizeEnums(nr)
	if *nr != *old {
		if err := tx.UpdateFields(ctx, nr, runFields...); err != nil {
			return err
		}
	}
	*run = *nr
	return nil
}

// runFields are the fields of an OS update run that the maintenance
// module writes after its creation (UpdateOSUpdateRun).
var runFields = []string{"name", "description", "status", "statusIndicator", "statusDetails", "statusTimestamp", "endTime"}

// OpenOSUpdateRun returns the newest run of the instance that has not
// ended (endTime 0), or nil.
func OpenOSUpdateRun(ctx context.Context, tx eim.Tx, instanceID string) (*eim.OSUpdateRun, error) {
	if err := eim.CheckID(eim.KindInstance, "instance", instanceID); err != nil {
		return nil, err
	}
	items, _, err := tx.List(ctx, eim.KindOSUpdateRun, eim.Query{
		Filter:  `instance.resourceId="` + instanceID + `" AND endTime=0`,
		OrderBy: "startTime desc", Limit: 1, NoTotal: true,
	})
	if err != nil {
		return nil, fmt.Errorf("open OS update run of %s: %w", instanceID, err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	return items[0].(*eim.OSUpdateRun), nil
}

// SetInstanceUpdateStatus writes an instance's update status (updateStatus,
// updateStatusIndicator, and updateStatusTimestamp = at) when the text or
// the indicator differs from the stored ones, and returns the instance as
// stored. The texts the API documents are eim.UpdateStatus*.
func SetInstanceUpdateStatus(ctx context.Context, tx eim.Tx, instanceID, status string, indicator eim.StatusIndication, at time.Time) (*eim.Instance, error) {
	if err := eim.CheckID(eim.KindInstance, "instance", instanceID); err != nil {
		return nil, err
	}
	r, err := tx.Get(ctx, eim.KindInstance, instanceID)
	if err != nil {
		return nil, err
	}
	in := r.(*eim.Instance)
	st := StatusAt(status, indicator, at)
	if err := st.check("updateStatus"); err != nil {
		return nil, err
	}
	if in.UpdateStatus == st.Text && in.UpdateStatusIndicator == st.Indicator {
		return in, nil
	}
	if err := SetUpdateStatus(ctx, tx, in, st); err != nil {
		return nil, err
	}
	return in, nil
}

// UpdateCounts counts instances by the state of their OS updates, from
// their updateStatusIndicator: Updating IN_PROGRESS, Failed ERROR,
// UpToDate IDLE (the last update completed, or the node found nothing
// new), Unknown the rest (nothing reported yet: "No Current Update",
// UNSPECIFIED). The four add up to Total. OSUpdateAvailable, apart,
// counts those whose osUpdateAvailable is not empty (a newer OS is known),
// whatever their status.
type UpdateCounts struct {
	Total             int `json:"total"`
	UpToDate          int `json:"upToDate"`
	Updating          int `json:"updating"`
	Failed            int `json:"failed"`
	Unknown           int `json:"unknown"`
	OSUpdateAvailable int `json:"osUpdateAvailable"`
}

func (c *UpdateCounts) add(indicator string, n int) {
	c.Total += n
	switch eim.StatusIndication(indicator) {
	case eim.StatusIdle:
		c.UpToDate += n
	case eim.StatusInProgress:
		c.Updating += n
	case eim.StatusError:
		c.Failed += n
	default:
		c.Unknown += n
	}
}

// OSUpdateCounts are the counts of the instances of one OS profile.
type OSUpdateCounts struct {
	OSResourceID string `json:"osResourceId"`
	Name         string `json:"name"`
	ProfileName  string `json:"profileName"`
	ImageID      string `json:"imageId"`
	UpdateCounts
}

// UpdatesSummary is the fleet-wide view of OS updates: the project's
// counts and, per OS profile its instances run, theirs.
type UpdatesSummary struct {
	UpdateCounts
	OperatingSystems []OSUpdateCounts `json:"operatingSystems"`
}

// UpdatesSummary counts the project's instances matching filter (AIP-160
// over instances, "" for all) by update state, per OS profile (ordered by
// name, then ID). Two grouped counts, whatever the size of the fleet.
func (s *Service) UpdatesSummary(ctx context.Context, project, filter string) (*UpdatesSummary, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	sum := &UpdatesSummary{OperatingSystems: []OSUpdateCounts{}}
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		byState, err := tx.CountBy(ctx, eim.KindInstance, eim.Query{Filter: filter}, "osID", "updateStatusIndicator")
		if err != nil {
			return err
		}
		// Those with nothing available; the others have an update.
		noUpdate, err := tx.CountBy(ctx, eim.KindInstance, eim.Query{Filter: filter, Where: []eim.Cond{{Field: "osUpdateAvailable", Value: nil}}}, "osID")
		if err != nil {
			return err
		}
		perOS := map[string]*OSUpdateCounts{}
		of := func(id string) *OSUpdateCounts {
			c := perOS[id]
			if c == nil {
				c = &OSUpdateCounts{OSResourceID: id}
				perOS[id] = c
			}
			return c
		}
		for _, g := range byState {
			of(g.Values[0]).add(g.Values[1], g.Count)
			sum.add(g.Values[1], g.Count)
		}
		for _, c := range perOS {
			c.OSUpdateAvailable = c.Total
		}
		sum.OSUpdateAvailable = sum.Total
		for _, g := range noUpdate {
			of(g.Values[0]).OSUpdateAvailable -= g.Count
			sum.OSUpdateAvailable -= g.Count
		}
		osIDs := make([]string, 0, len(perOS))
		for id := range perOS {
			if id != "" {
				osIDs = append(osIDs, id)
			}
		}
		oses, err := tx.GetMany(ctx, eim.KindOS, osIDs)
		if err != nil {
			return fmt.Errorf("load OS profiles: %w", err)
		}
		for _, r := range oses {
			o := r.(*eim.OS)
			c := perOS[o.ResourceID]
			c.Name, c.ProfileName, c.ImageID = o.Name, o.ProfileName, o.ImageID
		}
		for _, c := range perOS {
			sum.OperatingSystems = append(sum.OperatingSystems, *c)
		}
		slices.SortFunc(sum.OperatingSystems, func(a, b OSUpdateCounts) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return strings.Compare(a.OSResourceID, b.OSResourceID)
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}
