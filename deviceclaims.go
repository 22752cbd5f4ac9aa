package eim

import (
	"context"
	"regexp"
)

// DeviceClaims are the onboarding module's typed operations on the hosts
// a calling device may be: the registrations of its UUID and serial
// number across projects, and what Discover writes of them (registration
// statuses, the Secure Boot state reported, the statuses of a Secure Boot
// mismatch, node credentials). They read the score of columns the
// decision needs, never whole hosts, and write only the fields a change names, in
// a transaction of their own run by the TxRunner the store was asked for
// them with (a batch shared with other devices' calls; unscoped, as a
// device's registrations may be in several projects). The writes are
// recorded as any field write of a host is: an event in the change feed
// and an audit record.
type DeviceClaims interface {
	// Claims reads, in a read-only transaction, the device's claims: the
	// hosts of every project registered with uuid (compared without
	// regard to case; "" none) and those registered with serial ("" none),
	// each list the earliest registrations first, at most
	// MaxDeviceClaims of each.
	Claims(ctx context.Context, uuid, serial string) (DeviceClaimSet, error)
	// RecordDiscover reads the claims as Claims does, lets decide say
	// what the device's call changes, and writes that, all in one
	// transaction. decide may run more than once (a transaction that lost
	// a race runs again) and must be pure; an error from it is returned
	// and nothing is written. EINVALID naming the field when a change is
	// not a valid one; a change of a host that is not among the claims is
	// EINVALID too.
	RecordDiscover(ctx context.Context, uuid, serial string, decide func(DeviceClaimSet) ([]ClaimChange, error)) error
}

// MaxDeviceClaims bounds the hosts read for one UUID or serial number:
// the earliest registrations count.
const MaxDeviceClaims = 16

// DeviceClaimSet are a device's claims: the hosts registered with its
// UUID, and those registered with its serial number (a host may be in
// both).
type DeviceClaimSet struct {
	ByUUID, BySerial []*DeviceClaim
}

// DeviceClaim is a host as the onboarding of a device that may be it sees
// it.
type DeviceClaim struct {
	ID, Project                string
	UUID, SerialNumber         string
	DesiredState, CurrentState HostState
	Registration               StatusValue // registrationStatus
	// CredGen is the host's node credential generation (a new issue
	// writes over it).
	CredGen int64
	// InstanceState is the current state of the host's instance, "" when
	// it has none.
	InstanceState InstanceState
	// InstanceID and SecurityFeature are the host's instance's ID
	// ("" when it has none) and security feature, as CheckSecureBoot
	// compares it with the device's Secure Boot state.
	InstanceID      string
	SecurityFeature SecurityFeature
	// HostStatus and Onboarding are the host's hostStatus and
	// onboardingStatus, each with its indicator and time.
	HostStatus, Onboarding StatusValue
	// SecureBoot is the Secure Boot state the host's node last reported
	// and SecureBootAt when it was read, unix seconds (0: never).
	SecureBoot   SecureBootState
	SecureBootAt uint64
}

// Instance is the claim's instance as CheckSecureBoot takes it (its ID and
// security feature), nil when the host has none.
func (c *DeviceClaim) Instance() *Instance {
	if c.InstanceID == "" {
		return nil
	}
	return &Instance{Meta: Meta{ResourceID: c.InstanceID}, HostID: c.ID, SecurityFeature: c.SecurityFeature, CurrentState: c.InstanceState}
}

// ClaimChange is what a decision writes of one claimed host: each part
// that is not nil, in the order of the fields.
type ClaimChange struct {
	Project, ID  string
	Registration *StatusValue
	// SecureBoot is the Secure Boot state the device reported, to be
	// recorded (when SecureBootDue says so).
	SecureBoot *SecureBootReport
	// HostStatus is written over the host status read (a change
	// meanwhile runs the transaction again).
	HostStatus *StatusValue
	// Onboarding is the onboarding status of a device refused;
	// Credentials carry the status of one onboarded (not both).
	Onboarding  *StatusValue
	Credentials *IssuedCredentials
}

// SecureBootReport is a node's Secure Boot state and when it was read,
// unix seconds.
type SecureBootReport struct {
	State SecureBootState
	At    uint64
}

// IssuedCredentials are what onboarding records when it gives a node
// credentials: the secret's hash, the next credential generation (over
// the one read, while the host is still to be onboarded), current state
// ONBOARDED and the onboarding status; the device's UUID and serial
// number fill in what the host lacks.
type IssuedCredentials struct {
	// SecretHash is the lower-case hex SHA-256 of the node's new client
	// secret.
	SecretHash string
	// Status is the onboarding status.
	Status StatusValue
	// UUID and SerialNumber are what the device reported; each is
	// recorded when the host has none ("" nothing).
	UUID, SerialNumber string
}

var reSecretHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Check validates c, a change of claim, naming the field at fault.
func (c ClaimChange) Check(claim *DeviceClaim) error {
	if c.Registration != nil {
		if err := c.Registration.check("registrationStatus"); err != nil {
			return err
		}
	}
	if sb := c.SecureBoot; sb != nil {
		if err := checkEnum("secureBootState", sb.State); err != nil {
			return err
		}
		if sb.State == "" || sb.State == SecureBootStateUnspecified {
			return Errorf(EINVALID, "secureBootState: %s says nothing of the firmware and is not recorded", SecureBootStateUnspecified)
		}
		if sb.At == 0 {
			return Errorf(EINVALID, "secureBootStateTimestamp: want the time the state was read, unix seconds")
		}
	}
	if c.HostStatus != nil {
		if err := c.HostStatus.check("hostStatus"); err != nil {
			return err
		}
	}
	if c.Onboarding != nil {
		if c.Credentials != nil {
			return Errorf(EINVALID, "onboardingStatus: given twice (the credentials carry one)")
		}
		if err := c.Onboarding.check("onboardingStatus"); err != nil {
			return err
		}
	}
	if o := c.Credentials; o != nil {
		if claim.DesiredState != HostStateOnboarded {
			return Errorf(EPRECONDITION, "host %s is not to be onboarded (desiredState %s)", claim.ID, claim.DesiredState)
		}
		if !reSecretHash.MatchString(o.SecretHash) {
			return Errorf(EINVALID, "secretHash: want 64 lower-case hex digits")
		}
		if err := o.Status.check("onboardingStatus"); err != nil {
			return err
		}
		if o.UUID != "" && !ValidUUID(o.UUID) {
			return Errorf(EINVALID, "uuid: %q is not a UUID", o.UUID)
		}
		if o.SerialNumber != "" && !ValidSerial(o.SerialNumber) {
			return Errorf(EINVALID, "serialNumber: %q must be 5 to 20 letters or digits", o.SerialNumber)
		}
	}
	return nil
}
