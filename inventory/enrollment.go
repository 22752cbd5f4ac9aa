package inventory

import (
	"context"
	"time"

	"github.com/eimhq/eim"
)

// ApproveEnrollment approves the project's enrollment request id, as by
// (an audit actor; ruleID the rule, when one decided): in one transaction
// the device's host is created (AdmitHost: onboarded, named, at the
// approval's site with its metadata) and the request records it. The API,
// the UI and the onboarding module's rules approve through it.
func ApproveEnrollment(ctx context.Context, st eim.EnrollmentStore, project, id, by, ruleID string, a eim.EnrollmentApproval, now time.Time) (*eim.EnrollmentRequest, error) {
	if a.Metadata == nil {
		a.Metadata = eim.Metadata{}
	}
	if a.SiteID != "" {
		if err := eim.CheckID(eim.KindSite, "siteId", a.SiteID); err != nil {
			return nil, err
		}
	}
	if err := eim.CheckApprovalMetadata("metadata", a.Metadata); err != nil {
		return nil, err
	}
	ctx = eim.WithActor(ctx, by)
	return st.DecideEnrollment(ctx, project, id, eim.EnrollmentDecision{State: eim.EnrollmentApproved, By: by, RuleID: ruleID, Approval: a, At: now},
		func(tx eim.Tx, req *eim.EnrollmentRequest) (string, error) {
			h, err := AdmitHost(ctx, tx, project, HostRegistration{Name: a.Name, UUID: req.UUID, SerialNumber: req.SerialNumber}, a.SiteID, a.Metadata)
			if err != nil {
				return "", err
			}
			return h.ResourceID, nil
		})
}
