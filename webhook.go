package eim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhooks: a project's receivers of event notifications (see
// docs/audit.md). The webhooks module derives the events from the change
// feed and delivers them, signed, at least once and in order per resource.

// The event types a webhook may subscribe to.
const (
	EventHostOnboarded              = "host.onboarded"
	EventHostConnectionLost         = "host.connection_lost"
	EventInstanceRunning            = "instance.running"
	EventInstanceProvisioningFailed = "instance.provisioning_failed"
	EventInstanceUpdateFailed       = "instance.update_failed"
	EventProjectDeleted             = "project.deleted"
	// The oob module's: a host's BMC reports a power state other than the
	// one desired (its powerStatus becomes PowerStatusMismatch), and a
	// power job's creation and end.
	EventHostPowerMismatch = "host.power_mismatch"
	EventPowerJobCreated   = "power_job.created"
	EventPowerJobSucceeded = "power_job.succeeded"
	EventPowerJobFailed    = "power_job.failed"
	EventPowerJobCancelled = "power_job.cancelled"
)

// EventTypes are every event type, in a stable order.
var EventTypes = []string{
	EventHostOnboarded, EventHostConnectionLost, EventInstanceRunning,
	EventInstanceProvisioningFailed, EventInstanceUpdateFailed, EventProjectDeleted,
	EventHostPowerMismatch, EventPowerJobCreated, EventPowerJobSucceeded, EventPowerJobFailed, EventPowerJobCancelled,
}

// PowerStatusMismatch is the powerStatus of a host whose BMC reports a
// power state other than the one desired (the original's text).
const PowerStatusMismatch = "mismatch between desired and current power state"

// Webhook is a receiver of a project's events. Its Secret keys the
// signature of every delivery; the API takes it and never shows it.
type Webhook struct {
	ID         string   `json:"webhookId"`
	Project    string   `json:"-"`
	URL        string   `json:"url"`
	EventTypes []string `json:"eventTypes"`
	Secret     string   `json:"-"`
	CreatedAt  Time     `json:"createdAt"`
}

// KindWebhook prefixes webhook IDs and names them in the audit log; a
// webhook is not a Store resource (Kinds does not list it).
const KindWebhook Kind = "webhook"

// Limits of a webhook.
const (
	MaxWebhookURL    = 2048
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
)

// Notification is an event to queue for a project's webhooks
// (Store.QueueEvents): its ID (the same for every webhook), type and body,
// and when its change happened: a webhook created after that does not get
// it (zero: every webhook subscribed gets it).
type Notification struct {
	ID   string
	Type string
	Body []byte
	At   Time
}

// CursorMove is one resource's step in Store.QueueEvents.
type CursorMove struct {
	ResourceID string
	From, Upto int64
	Events     []Notification
}

// NewEventID returns a fresh event ID.
func NewEventID() string {
	return "evt-" + strings.TrimPrefix(NewID("x"), "x-") + strings.TrimPrefix(NewID("x"), "x-")
}

// DeliveryState is where a delivery stands.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "PENDING"   // waiting for its (next) attempt
	DeliveryDelivered DeliveryState = "DELIVERED" // the receiver answered 2xx
	DeliveryFailed    DeliveryState = "FAILED"    // given up (MaxDeliveryAge)
)

// MaxDeliveryAge is how long a delivery is retried before it is given up.
const MaxDeliveryAge = 24 * time.Hour

// Delivery is one event for one webhook.
type Delivery struct {
	// ID is the event's ID for the receiver's de-duplication: the same in
	// every attempt (header EIM-Event-Id).
	ID         string        `json:"deliveryId"`
	Seq        int64         `json:"-"`
	Project    string        `json:"-"`
	WebhookID  string        `json:"webhookId"`
	EventType  string        `json:"eventType"`
	ResourceID string        `json:"resourceId"`
	State      DeliveryState `json:"state"`
	Attempts   int           `json:"attempts"`
	CreatedAt  Time          `json:"createdAt"`
	NextAt     Time          `json:"nextAttemptAt"`
	// LastStatus is the HTTP status of the last attempt (0: none came),
	// LastError what went wrong ("" after a success).
	LastStatus int    `json:"lastStatusCode"`
	LastError  string `json:"lastError"`
	// What is sent: the body (JSON) and, for the signature, the secret
	// and URL the webhook had when the event happened.
	Body   []byte `json:"-"`
	URL    string `json:"-"`
	Secret string `json:"-"`
}

// URLPolicy is what webhook URLs may point at. AllowPrivate (the server's
// --webhook-allow-private) also accepts link-local and cloud metadata
// addresses, for a deployment whose receivers live there.
type URLPolicy struct {
	AllowPrivate bool
}

// metadataHosts are the names of cloud metadata services; their addresses
// are link-local and refused anyway.
var metadataHosts = []string{"metadata.google.internal", "metadata", "instance-data", "metadata.azure.com"}

// CheckWebhookURL validates a webhook's URL: http or https, a host, no
// user information, at most MaxWebhookURL long; no link-local address
// (169.254.0.0/16, fe80::/10: cloud metadata services live there) or
// metadata host name unless the policy allows it. Loopback and private
// networks are allowed (receivers beside the server). Names are not
// resolved here: a name is checked again, resolved, when it is called.
func CheckWebhookURL(raw string, pol URLPolicy) error {
	if raw == "" {
		return Errorf(EINVALID, "url: is required")
	}
	if len(raw) > MaxWebhookURL {
		return Errorf(EINVALID, "url: longer than %d characters", MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Errorf(EINVALID, "url: not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Errorf(EINVALID, "url: scheme %q is not http or https", u.Scheme)
	}
	if u.User != nil {
		return Errorf(EINVALID, "url: must not carry user information")
	}
	host := u.Hostname()
	if host == "" {
		return Errorf(EINVALID, "url: has no host")
	}
	if u.Port() != "" {
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			return Errorf(EINVALID, "url: port %q is not 1 to 65535", u.Port())
		}
	}
	if pol.AllowPrivate {
		return nil
	}
	if slices.Contains(metadataHosts, strings.ToLower(strings.TrimSuffix(host, "."))) {
		return Errorf(EINVALID, "url: %s is a cloud metadata service (allowed only with --webhook-allow-private)", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := CheckWebhookAddr(ip, pol); err != nil {
			return err
		}
	}
	return nil
}

// CheckWebhookAddr refuses the addresses CheckWebhookURL refuses: the
// webhooks module checks the address a name resolved to before it calls.
func CheckWebhookAddr(ip netip.Addr, pol URLPolicy) error {
	if pol.AllowPrivate {
		return nil
	}
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip == netip.MustParseAddr("fd00:ec2::254") || ip.IsUnspecified() || ip.IsMulticast() {
		return Errorf(EINVALID, "url: %s is a link-local, metadata, multicast or unspecified address (allowed only with --webhook-allow-private)", ip)
	}
	return nil
}

// CheckEventTypes validates a webhook's event types: at least one, each
// known, none twice.
func CheckEventTypes(types []string) error {
	if len(types) == 0 {
		return Errorf(EINVALID, "eventTypes: name at least one of %s", strings.Join(EventTypes, ", "))
	}
	for i, t := range types {
		if !slices.Contains(EventTypes, t) {
			return Errorf(EINVALID, "eventTypes: unknown event type %q (known: %s)", t, strings.Join(EventTypes, ", "))
		}
		if slices.Contains(types[:i], t) {
			return Errorf(EINVALID, "eventTypes: %q given twice", t)
		}
	}
	return nil
}

// WebhookSecretPurpose is what a webhook's sealed secret is bound to (see
// seal.Key.SealText): a sealed secret copied to another webhook's row
// does not open there.
func WebhookSecretPurpose(project, webhookID string) string {
	return "webhook/" + project + "/" + webhookID + "/secret"
}

// CheckWebhookSecret validates a secret given by a user.
func CheckWebhookSecret(s string) error {
	if len(s) < MinWebhookSecret || len(s) > MaxWebhookSecret {
		return Errorf(EINVALID, "secret: must be %d to %d characters", MinWebhookSecret, MaxWebhookSecret)
	}
	return nil
}

// SignatureHeader is the header of a delivery's signature:
//
//	EIM-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A receiver recomputes v1 over the timestamp, a dot and the raw body, with
// the webhook's secret, compares in constant time, and refuses a t too far
// from its clock (replays).
const SignatureHeader = "EIM-Signature"

// Sign returns the value of the SignatureHeader of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + signature(secret, ts, body)
}

func signature(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks a SignatureHeader value against body: the
// receiver's side of Sign, with tolerance for the age of t.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, v1 string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || v1 == "" {
		return fmt.Errorf("signature: malformed %s header", SignatureHeader)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature: timestamp %d outside the tolerance", sec)
	}
	if !hmac.Equal([]byte(signature(secret, ts, body)), []byte(v1)) {
		return fmt.Errorf("signature: mismatch")
	}
	return nil
}
