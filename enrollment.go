package eim

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// The enrollment lobby (the onboarding module, docs/enrollment.md): a
// device that calls home with a project's enrollment token and matches no
// host waits in the project's lobby as an EnrollmentRequest until a person
// or an EnrollmentRule approves it (its host is then created) or denies
// it. Neither is a Store resource (Kinds does not list them): they have a
// store of their own (EnrollmentStore), scoped to the project.

// KindEnrollment names an enrollment request (IDs enrollment-<8 hex>) and
// KindEnrollmentRule an auto-approval rule, in IDs and the audit log.
const (
	KindEnrollment     Kind = "enrollment"
	KindEnrollmentRule Kind = "enrollmentrule"
)

// EnrollmentState is where a request stands.
type EnrollmentState string

const (
	EnrollmentPending  EnrollmentState = "PENDING"
	EnrollmentApproved EnrollmentState = "APPROVED"
	EnrollmentDenied   EnrollmentState = "DENIED"
)

// Valid reports whether s is one of the states.
func (s EnrollmentState) Valid() bool {
	return s == EnrollmentPending || s == EnrollmentApproved || s == EnrollmentDenied
}

// EnrollmentHardware is what a device says of itself when it enrolls.
type EnrollmentHardware struct {
	CPUModel     string `json:"cpuModel,omitempty"`
	CPUCores     uint32 `json:"cpuCores,omitempty"`
	MemoryBytes  uint64 `json:"memoryBytes,omitempty"`
	ProductName  string `json:"productName,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	OS           string `json:"os,omitempty"`
}

// EnrollmentApproval is what an approval gives the device's host.
type EnrollmentApproval struct {
	Name     string   `json:"name,omitempty"`
	SiteID   string   `json:"siteId,omitempty"`
	Metadata Metadata `json:"metadata"`
}

// EnrollmentRequest is one device in a project's lobby. A device has one
// request per project, keyed by its identity (its UUID, else its serial
// number): its calls update it.
type EnrollmentRequest struct {
	Project      string             `json:"-"`
	ID           string             `json:"resourceId"`
	UUID         string             `json:"uuid,omitempty"`
	SerialNumber string             `json:"serialNumber,omitempty"`
	MACs         []string           `json:"macAddresses"`
	Hostname     string             `json:"hostname,omitempty"`
	Hardware     EnrollmentHardware `json:"hardware"`
	// Labels are what the device reported (its agent's --label flags).
	Labels Metadata `json:"labels"`
	// Installed: the device runs its OS already and skips provisioning.
	Installed bool            `json:"installed"`
	State     EnrollmentState `json:"state"`
	// Reason is a denial's reason, or why a request was opened again.
	Reason    string             `json:"reason,omitempty"`
	DecidedBy string             `json:"decidedBy,omitempty"`
	DecidedAt *Time              `json:"decidedAt,omitempty"`
	RuleID    string             `json:"ruleId,omitempty"`
	HostID    string             `json:"hostId,omitempty"`
	Approval  EnrollmentApproval `json:"approval"`
	// Attempts counts the device's calls; FirstSeen and LastSeen date
	// the first and the last one saved (see EnrollmentCall).
	Attempts  int64 `json:"attempts"`
	FirstSeen Time  `json:"firstSeen"`
	LastSeen  Time  `json:"lastSeen"`
}

// Key is the identity a request is kept under: "uuid:<uuid>", else
// "serial:<serial>".
func (r *EnrollmentRequest) Key() string { return EnrollmentKey(r.UUID, r.SerialNumber) }

// EnrollmentKey is the identity key of a device (see EnrollmentRequest.Key).
func EnrollmentKey(uuid, serial string) string {
	if uuid != "" {
		return "uuid:" + strings.ToLower(uuid)
	}
	return "serial:" + serial
}

// EnrollmentRuleKind is what a rule matches on.
type EnrollmentRuleKind string

const (
	// RuleSerial approves devices whose serial number is in the list.
	RuleSerial EnrollmentRuleKind = "SERIAL"
	// RuleLabels approves devices that report every label of the rule.
	RuleLabels EnrollmentRuleKind = "LABELS"
	// RuleToken approves devices that call with the rule's own token
	// (a site's token), placing them at the rule's site.
	RuleToken EnrollmentRuleKind = "TOKEN"
	// RuleAny approves every device that calls with the project's token
	// (how the token worked before the lobby).
	RuleAny EnrollmentRuleKind = "ANY"
)

// EnrollmentRule approves matching requests without a person.
type EnrollmentRule struct {
	Project       string             `json:"-"`
	ID            string             `json:"resourceId"`
	Name          string             `json:"name"`
	Kind          EnrollmentRuleKind `json:"kind"`
	SerialNumbers []string           `json:"serialNumbers"`
	MatchLabels   Metadata           `json:"matchLabels"`
	// TokenHash is the hex SHA-256 of a TOKEN rule's token (never on the
	// wire; the token itself is shown once, when the rule is created).
	TokenHash string `json:"-"`
	// SiteID, Metadata: what an approval by the rule gives the host.
	SiteID    string   `json:"siteId,omitempty"`
	Metadata  Metadata `json:"metadata"`
	CreatedAt Time     `json:"createdAt"`
}

// Limits of the lobby.
const (
	MaxEnrollmentRules  = 100
	MaxRuleSerials      = 10000
	MaxEnrollmentLabels = 32
	MaxEnrollmentMACs   = 16
	MaxEnrollmentReason = 512
)

// Matches reports whether the rule approves req (a TOKEN rule matches the
// requests that came with its token: the caller knows that).
func (r *EnrollmentRule) Matches(req *EnrollmentRequest) bool {
	switch r.Kind {
	case RuleSerial:
		if req.SerialNumber == "" {
			return false
		}
		for _, s := range r.SerialNumbers {
			if strings.EqualFold(s, req.SerialNumber) {
				return true
			}
		}
		return false
	case RuleAny:
		return true
	case RuleLabels:
		if len(r.MatchLabels) == 0 {
			return false
		}
		for _, it := range r.MatchLabels {
			if v, ok := req.Labels.Get(it.Key); !ok || v != it.Value {
				return false
			}
		}
		return true
	}
	return false
}

// Validate checks a rule as created through the API; the error names the
// field by its wire name.
func (r *EnrollmentRule) Validate() error {
	if r.Name == "" || !ValidName(r.Name) {
		return Errorf(EINVALID, "name: %q must be 1 to 50 characters: letters, digits, space and - _ . / :", r.Name)
	}
	switch r.Kind {
	case RuleSerial:
		if len(r.SerialNumbers) == 0 || len(r.SerialNumbers) > MaxRuleSerials {
			return Errorf(EINVALID, "serialNumbers: 1 to %d serial numbers required for a SERIAL rule", MaxRuleSerials)
		}
		for i, s := range r.SerialNumbers {
			if !ValidSerial(s) {
				return Errorf(EINVALID, "serialNumbers[%d]: %q must be 5 to 20 letters or digits", i, s)
			}
		}
		if len(r.MatchLabels) > 0 {
			return Errorf(EINVALID, "matchLabels: only for a LABELS rule")
		}
	case RuleLabels:
		if len(r.MatchLabels) == 0 || len(r.MatchLabels) > MaxEnrollmentLabels {
			return Errorf(EINVALID, "matchLabels: 1 to %d labels required for a LABELS rule", MaxEnrollmentLabels)
		}
		for i, it := range r.MatchLabels {
			if err := CheckMetadataItem("matchLabels["+strconv.Itoa(i)+"]", it); err != nil {
				return err
			}
		}
		if len(r.SerialNumbers) > 0 {
			return Errorf(EINVALID, "serialNumbers: only for a SERIAL rule")
		}
	case RuleToken:
		if r.SiteID == "" {
			return Errorf(EINVALID, "siteId: required for a TOKEN rule (the site whose token it is)")
		}
		if len(r.SerialNumbers) > 0 || len(r.MatchLabels) > 0 {
			return Errorf(EINVALID, "kind: a TOKEN rule takes neither serialNumbers nor matchLabels")
		}
	case RuleAny:
		if len(r.SerialNumbers) > 0 || len(r.MatchLabels) > 0 {
			return Errorf(EINVALID, "kind: an ANY rule takes neither serialNumbers nor matchLabels")
		}
	default:
		return Errorf(EINVALID, "kind: %q must be SERIAL, LABELS, TOKEN or ANY", r.Kind)
	}
	if r.SiteID != "" {
		if err := CheckID(KindSite, "siteId", r.SiteID); err != nil {
			return err
		}
	}
	return CheckApprovalMetadata("metadata", r.Metadata)
}

// CheckApprovalMetadata checks the labels an approval gives a host.
func CheckApprovalMetadata(field string, md Metadata) error {
	if len(md) > MaxEnrollmentLabels {
		return Errorf(EINVALID, "%s: at most %d labels", field, MaxEnrollmentLabels)
	}
	seen := map[string]bool{}
	for i, it := range md {
		if err := CheckMetadataItem(field+"["+strconv.Itoa(i)+"]", it); err != nil {
			return err
		}
		if seen[it.Key] {
			return Errorf(EINVALID, "%s[%d].key: %q appears twice", field, i, it.Key)
		}
		seen[it.Key] = true
	}
	return nil
}

// EnrollmentCall is a device's call into a project's lobby.
type EnrollmentCall struct {
	Request *EnrollmentRequest // its identity and what it reported
	Now     time.Time
	// Quiet: a request saved less than Quiet ago is not written again;
	// the call is counted in Unsaved, to be added at the next write.
	Quiet time.Duration
	// Unsaved calls to add to Attempts when this one writes.
	Unsaved int64
}

// EnrollmentQuery selects a page of a project's requests, newest first.
type EnrollmentQuery struct {
	State         EnrollmentState // "" all
	UUID, Serial  string
	Limit, Offset int
}

// EnrollmentDecision is a person's or a rule's decision on a request.
type EnrollmentDecision struct {
	State    EnrollmentState // APPROVED or DENIED
	By       string          // the actor, as audit records name them
	RuleID   string
	Reason   string
	Approval EnrollmentApproval
	At       time.Time
}

// EnrollmentStore keeps the lobby. Every method owns its transaction;
// writes of requests and rules are audited (KindEnrollment,
// KindEnrollmentRule) and put no event in the change feed.
type EnrollmentStore interface {
	// RecordEnrollmentCall finds the project's request of the call's
	// device or creates it PENDING, and saves what the device reported,
	// its attempts and LastSeen — unless it was saved less than
	// call.Quiet ago: then it writes nothing (whatever the device
	// reports). It returns the request as stored and whether it wrote.
	RecordEnrollmentCall(ctx context.Context, project string, call EnrollmentCall) (*EnrollmentRequest, bool, error)
	// FindEnrollmentRequest returns one of the project's requests.
	FindEnrollmentRequest(ctx context.Context, project, id string) (*EnrollmentRequest, error)
	// FindEnrollmentRequestOfHost returns the approved request that
	// created the host, or ENOTFOUND.
	FindEnrollmentRequestOfHost(ctx context.Context, project, hostID string) (*EnrollmentRequest, error)
	// ListEnrollmentRequests returns a page and the number matching.
	ListEnrollmentRequests(ctx context.Context, project string, q EnrollmentQuery) ([]*EnrollmentRequest, int, error)
	// DecideEnrollment records d on the request, in one transaction with
	// admit (for an approval: it creates the host in tx and returns its
	// ID). A request already in d.State is EPRECONDITION unless it is
	// APPROVED and admit is nil.
	DecideEnrollment(ctx context.Context, project, id string, d EnrollmentDecision, admit func(tx Tx, req *EnrollmentRequest) (string, error)) (*EnrollmentRequest, error)
	// ReopenEnrollment puts an APPROVED request whose host was hostID
	// back to PENDING with reason (its host is gone); false when the
	// request is no longer so.
	ReopenEnrollment(ctx context.Context, project, id, hostID, reason string) (bool, error)
	DeleteEnrollmentRequest(ctx context.Context, project, id string) error

	CreateEnrollmentRule(ctx context.Context, r *EnrollmentRule) error
	ListEnrollmentRules(ctx context.Context, project string) ([]*EnrollmentRule, error)
	FindEnrollmentRule(ctx context.Context, project, id string) (*EnrollmentRule, error)
	DeleteEnrollmentRule(ctx context.Context, project, id string) error
	// FindEnrollmentRuleByToken returns the TOKEN rule, of any project,
	// whose token hash is hash (ENOTFOUND when none).
	FindEnrollmentRuleByToken(ctx context.Context, hash string) (*EnrollmentRule, error)
}
