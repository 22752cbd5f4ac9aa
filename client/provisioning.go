package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eimhq/eim"
)

// ProvisioningLog is a page of an instance's provisioning log.
type ProvisioningLog struct {
	InstanceID string            `json:"instanceId"`
	WorkflowID string            `json:"workflowId"` // "" until the node asks for its workflow
	Attempt    int               `json:"attempt"`
	State      eim.WorkflowState `json:"state"`
	// Message says why a FAILED workflow failed.
	Message      string                 `json:"message"`
	TotalActions int                    `json:"totalActions"`
	Entries      []eim.WorkflowLogEntry `json:"entries"`
	// Next is the seq to read on after. A gap between consecutive entries'
	// seqs is output dropped by the log's size cap.
	Next int `json:"next"`
}

// Finished reports whether the workflow ended (no more entries will come).
func (l *ProvisioningLog) Finished() bool {
	return l.State == eim.WorkflowSucceeded || l.State == eim.WorkflowFailed
}

// ProvisioningLog returns the entries of instance id's provisioning log
// after seq. A wait > 0 (at most 30 s; the server may answer sooner) waits
// for new entries or the end of the workflow.
func (c *Client) ProvisioningLog(ctx context.Context, project, id string, after int, wait time.Duration) (*ProvisioningLog, error) {
	p, err := item(project, eim.KindInstance, id)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.Itoa(after))
	}
	if s := int(wait / time.Second); s > 0 {
		q.Set("wait", strconv.Itoa(min(s, 30)))
	}
	p += "/provisioning_log"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out ProvisioningLog
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Reprovision retries instance id's failed provisioning: a new attempt of
// its workflow, rendered again from the current OS profile. The answer
// holds the new attempt's entries; read on after its Next. A workflow that
// is not FAILED is an EPRECONDITION error naming its state.
func (c *Client) Reprovision(ctx context.Context, project, id string) (*ProvisioningLog, error) {
	p, err := item(project, eim.KindInstance, id)
	if err != nil {
		return nil, err
	}
	var out ProvisioningLog
	if err := c.Do(ctx, http.MethodPost, p+"/reprovision", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RecoveryKey is the escrowed recovery key of an instance's encrypted disk
// (GET …/instances/{id}/recoverykey).
type RecoveryKey struct {
	InstanceID  string   `json:"instanceId"`
	HostID      string   `json:"hostId"`
	VolumeUUID  string   `json:"volumeUuid"`
	RecoveryKey string   `json:"recoveryKey"`
	EscrowedAt  eim.Time `json:"escrowedAt"`
}

// RecoveryKey reads the recovery key of instance id's encrypted disk: for
// administrators (eim-admin) only, each read recorded in the audit log. An
// instance without one is ENOTFOUND.
func (c *Client) RecoveryKey(ctx context.Context, project, id string) (*RecoveryKey, error) {
	p, err := item(project, eim.KindInstance, id)
	if err != nil {
		return nil, err
	}
	var out RecoveryKey
	if err := c.Do(ctx, http.MethodGet, p+"/recoverykey", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AttestationKey is the TPM keys pinned to a host (GET
// …/hosts/{id}/attestationkey).
type AttestationKey struct {
	HostID   string   `json:"hostId"`
	AKName   string   `json:"akName"`
	EKName   string   `json:"ekName"`
	PinnedAt eim.Time `json:"pinnedAt"`
	// Trust is EK_CERTIFICATE (the EK's maker's certificate was checked)
	// or FIRST_USE; TrustNote says it in words.
	Trust         string `json:"trust"`
	TrustNote     string `json:"trustNote"`
	EKCertificate *struct {
		Issuer string `json:"issuer"`
		Serial string `json:"serial"`
	} `json:"ekCertificate,omitempty"`
}

// AttestationKey reads the TPM keys pinned to host id. A host without
// any is ENOTFOUND.
func (c *Client) AttestationKey(ctx context.Context, project, id string) (*AttestationKey, error) {
	p, err := item(project, eim.KindHost, id)
	if err != nil {
		return nil, err
	}
	var out AttestationKey
	if err := c.Do(ctx, http.MethodGet, p+"/attestationkey", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetAttestationKey removes the TPM keys pinned to host id (its TPM was
// replaced): its next verified quote pins new ones. Administrators
// (eim-admin) only; recorded in the audit log.
func (c *Client) ResetAttestationKey(ctx context.Context, project, id string) error {
	p, err := item(project, eim.KindHost, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodDelete, p+"/attestationkey", nil, nil)
}
