package eim

import (
	"context"
	"iter"
	"time"
)

// Store is the persistence port: the only place state lives. Implementations
// (sqlstore: SQLite and PostgreSQL) pass one conformance suite.
//
// Every write runs in a transaction together with the change events it
// causes, so the feed never shows a change that did not commit and never
// misses one that did.
type Store interface {
	// View runs fn in a read-only transaction. A non-empty project scopes
	// every statement of the transaction to that project (tenant isolation is
	// enforced by the store, not by callers); "" sees all projects and is for
	// managers and administration only.
	View(ctx context.Context, project string, fn func(Tx) error) error
	// Update runs fn in a read-write transaction, scoped as for View. The
	// transaction commits when fn returns nil and rolls back otherwise.
	// A row fn read and then writes whole (Tx.Update) is never written
	// back over another transaction's change made in between: the store
	// either keeps the writers apart or rolls fn's transaction back and
	// runs fn again, so fn must be re-runnable (read what it needs through
	// tx, keep no effects outside it until Update returns). A transaction
	// that keeps losing that race fails with EUNAVAILABLE. A write of
	// some fields (Tx.UpdateFields) changes only those, and races only
	// with what its conditions name.
	Update(ctx context.Context, project string, fn func(Tx) error) error
	// UpdateGrouped is Update for a transaction that runs many callers'
	// calls together (inventory's Batcher). With Capabilities'
	// GroupedCreates its creates are held back and written together, so
	// Create does not report the failure of the insert itself: the
	// transaction does, and the caller must be ready to run the calls
	// again one by one to learn whose the failure was. Without it, it is
	// Update. It returns once the transaction has committed; its events
	// are in the feed once sequenced has returned (meanwhile the caller
	// may start its next transaction).
	UpdateGrouped(ctx context.Context, project string, fn func(Tx) error) (sequenced func(), err error)
	// OnCommit registers fn to be called, synchronously, after every
	// committed transaction of this Store that changed resources, with
	// its events (their revisions may not be assigned yet), before the
	// write returns to its caller: for in-process caches that must not
	// serve a value after the write that changed it has returned (writes
	// of other processes reach them through the feed). fn must be quick
	// and must not write.
	OnCommit(fn func([]Event))
	// Capabilities says what the store's database can do beyond this
	// contract: modules read it rather than ask which database it is.
	Capabilities() Capabilities

	// HostBeats returns the host module's typed operations on its hosts'
	// liveness, their transactions run by run (a batch shared with other
	// nodes' calls; nil: Update).
	HostBeats(run TxRunner) HostBeats
	// NodeReports returns the provisioning module's typed operations on
	// what its nodes' reports change (host status and name, instance
	// state and provisioning status, workflow), their transactions run by
	// run (nil: Update).
	NodeReports(run TxRunner) NodeReports
	// DeviceClaims returns the onboarding module's typed operations on the
	// hosts a calling device may be, their transactions run by run (nil:
	// Update), unscoped.
	DeviceClaims(run TxRunner) DeviceClaims
	// HostFacts returns the per-host view's reads of the columns it
	// keeps of hosts and instances, each in a read-only transaction of
	// view (nil: View).
	HostFacts(view TxViewer) HostFacts

	// SaveLastSeen records when nodes were last heard from. The host module
	// keeps liveness in memory and flushes it here in batches, so that a
	// heartbeat is not a write. A time older than the one stored is
	// ignored; hosts that no longer exist are skipped. Not in the feed.
	SaveLastSeen(ctx context.Context, seen []LastSeen) error
	// LastSeen returns every recorded time (what the host module knows
	// after a restart). A host's record goes with the host.
	LastSeen(ctx context.Context) ([]LastSeen, error)
	// LastSeenOf returns the recorded times of the hosts with these IDs
	// (any project) that have one, in any order: what a replica of the
	// host module reads, in one query, of hosts whose deadline passed
	// while other replicas may have heard them.
	LastSeenOf(ctx context.Context, hostIDs []string) ([]LastSeen, error)

	// Claim takes the lease name for holder until ttl from now, or
	// renews it when holder holds it already; a lease whose expiry passed
	// is taken by whoever claims it next. It reports whether holder holds
	// the lease now. "Now" is the database's clock on PostgreSQL, so the
	// processes' clocks need not agree. Leases make work run in one
	// process at a time (see package coord).
	Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// Release gives up holder's lease name at once, so that another
	// process may take it; it does nothing when another holds it.
	Release(ctx context.Context, name, holder string) error
	// Announce records the running process m (m.ID, m.Modules, and
	// m.Started when set; else the store's now, at its first
	// announcement) as live until ttl from now (m.Expires is ignored),
	// or renews it.
	Announce(ctx context.Context, m Member, ttl time.Duration) error
	// Members returns the processes whose announcement has not expired,
	// by ID.
	Members(ctx context.Context) ([]Member, error)
	// Leave removes the process id (a clean shutdown), so that the others
	// need not wait for its announcement to expire.
	Leave(ctx context.Context, id string) error

	// MetadataPairs returns the metadata pairs recorded for project's
	// label suggestions (RecordMetadataPairs), by key and value.
	MetadataPairs(ctx context.Context, project string) ([]MetadataItem, error)
	// RecordMetadataPairs remembers pairs for project's label
	// suggestions (the original's metadata broker); a pair recorded
	// already stays as it is. ENOTFOUND when the project does not exist.
	// The pairs go with their project.
	RecordMetadataPairs(ctx context.Context, project string, pairs []MetadataItem) error
	// ForgetMetadataPair removes a recorded pair; ENOTFOUND when it is not
	// recorded.
	ForgetMetadataPair(ctx context.Context, project string, pair MetadataItem) error

	CreateProject(ctx context.Context, p *Project) error
	// UpdateProject stores p.Settings of the existing project p.Name
	// (ENOTFOUND when there is none).
	UpdateProject(ctx context.Context, p *Project) error
	FindProject(ctx context.Context, name string) (*Project, error)
	// FindProjectByID returns the project whose ID (a UUID) is id, in any
	// letter case; ENOTFOUND when there is none.
	FindProjectByID(ctx context.Context, id string) (*Project, error)
	ListProjects(ctx context.Context) ([]*Project, error)
	// DeleteProject removes the project and every resource in it, recording
	// a delete event for each. Callers decide whether a non-empty project may
	// go (see inventory).
	DeleteProject(ctx context.Context, name string) error

	// Events returns up to limit events with Revision > after, oldest first,
	// of the given kinds (all kinds when none are given).
	Events(ctx context.Context, after int64, limit int, kinds ...Kind) ([]Event, error)
	// Watch yields every event with Revision > after, in order, waiting for
	// new ones until ctx is done; then it yields ctx's error once and stops.
	// A consumer that records the last revision it handled and passes it
	// back after a restart misses nothing. Other errors are yielded and end
	// the iteration.
	Watch(ctx context.Context, after int64, kinds ...Kind) iter.Seq2[Event, error]
	// Revision returns the newest committed revision.
	Revision(ctx context.Context) (int64, error)

	TenantStore

	// FeedPosition returns the last revision the named consumer of the
	// change feed recorded as handled (SaveFeedPosition), and whether it
	// recorded one. A consumer that runs once per deployment resumes
	// there when another process takes it over, or after a restart.
	FeedPosition(ctx context.Context, consumer string) (rev int64, ok bool, err error)
	// SaveFeedPosition records rev as the last revision consumer handled.
	// A position never moves back: a rev below the one recorded is
	// ignored (a process that lost its claim on the consumer may save
	// late). Not in the feed.
	SaveFeedPosition(ctx context.Context, consumer string, rev int64) error

	// The connect module's credentials and tunnel registry.
	ConnectStore
	// The clusters module's templates and clusters.
	ClusterStore
	// The oob module's BMCs of hosts and their power jobs.
	BMCStore
	PowerJobStore
	// The workloads module's edge workloads.
	EdgeWorkloadStore
	// The projects' object storage settings (package objstore).
	ObjectStorageStore
	// The onboarding module's enrollment lobby.
	EnrollmentStore
	// The provisioning module's escrowed recovery keys of encrypted disks.
	RecoveryKeyStore
	// The provisioning module's attestation keys pinned to hosts.
	AttestationKeyStore
	// Audit returns one page of the project's audit records matching q,
	// newest first, and how many match (-1 with NoTotal).
	Audit(ctx context.Context, project string, q AuditQuery) ([]AuditRecord, int, error)
	// AppendAudit records what is not a change of a resource (a user's
	// request through a cluster's tunnel), in one transaction, dated now:
	// each record's project, principal, action, kind, resource ID and
	// changes as given (Seq and Time are the store's).
	AppendAudit(ctx context.Context, recs []AuditRecord) error
	// PruneAudit deletes the audit records older than before and returns
	// how many went.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)

	// CreateWebhook stores w (its ID and CreatedAt set by the store) and
	// its audit record. ListWebhooks returns a project's webhooks
	// (every project's with ""), oldest first; FindWebhook one
	// (ENOTFOUND when it is not the project's); DeleteWebhook removes one
	// with its pending deliveries.
	CreateWebhook(ctx context.Context, w *Webhook) error
	// UpdateWebhook stores the URL, event types and secret of the
	// project's webhook w.ID (and its audit record); its pending
	// deliveries go to the new URL with the new secret.
	UpdateWebhook(ctx context.Context, w *Webhook) error
	FindWebhook(ctx context.Context, project, id string) (*Webhook, error)
	ListWebhooks(ctx context.Context, project string) ([]*Webhook, error)
	DeleteWebhook(ctx context.Context, project, id string) error
	// DeleteWebhooksOf removes every webhook and audit cursor of a deleted
	// project (their queued deliveries stay: they carry what they need).
	DeleteWebhooksOf(ctx context.Context, project string) error

	// AuditCursors returns how far each of the resources with these IDs
	// in the project has been turned into events (QueueEvents): the seq
	// of its last audit record handled; those with none are absent (0).
	AuditCursors(ctx context.Context, project string, resourceIDs []string) (map[string]int64, error)
	// AuditAfter returns the project's audit records of the resources in
	// after with a Seq above their value there, oldest first. A
	// resource's records are in the order of its changes' commits (each
	// change holds the resource's row while its record is written).
	AuditAfter(ctx context.Context, project string, after map[string]int64) ([]AuditRecord, error)
	// QueueEvents, in one transaction, applies moves of the project's
	// resources' cursors: for each, it queues its events for each of the
	// project's webhooks subscribed to their type and moves the
	// resource's cursor from From to Upto (Upto < 0: drops it, the
	// resource is gone). A move whose cursor is not at From was applied
	// already and is skipped: a handler that runs again queues nothing
	// twice. It returns how many events it queued.
	QueueEvents(ctx context.Context, project string, moves []CursorMove) (int, error)
	// DueDeliveries returns up to limit pending deliveries whose next
	// attempt is due at now, each the oldest pending one of its webhook
	// and resource (so that a resource's events go in order), oldest
	// first; none of webhooks in skip (busy with an attempt).
	DueDeliveries(ctx context.Context, now time.Time, limit int, skip []string) ([]*Delivery, error)
	// SaveDelivery records the outcome of an attempt of d: its State,
	// Attempts, NextAt, LastStatus and LastError.
	SaveDelivery(ctx context.Context, d *Delivery) error
	// Deliveries returns one page of a webhook's deliveries, newest first,
	// and their number.
	Deliveries(ctx context.Context, project, webhookID string, limit, offset int) ([]*Delivery, int, error)

	Close() error
}

// AuditQuery selects audit records of a project.
type AuditQuery struct {
	Filter        string // AIP-160 over AuditSchema
	Limit, Offset int
	NoTotal       bool
}

// Capabilities are what a Store's database can do beyond the contract of
// Store. The zero value is the most restrictive (SQLite's).
type Capabilities struct {
	// ConcurrentWriters: write transactions run at once (PostgreSQL).
	// Without it one write transaction runs at a time (SQLite): a call
	// that may need no write looks in a read-only transaction first, so
	// that unchanged answers do not queue for the writer, and batches of
	// writes go one at a time.
	ConcurrentWriters bool
	// GroupedCreates: UpdateGrouped writes a transaction's creates
	// together, a statement per kind instead of one per create (each
	// statement is a round trip). Without it UpdateGrouped is Update.
	GroupedCreates bool
	// Replicas: several server processes may share the database. Without
	// it (SQLite) one process serves it.
	Replicas bool
}

// Tx is a transaction of a Store. Its methods take and return the resource
// types of this package (pointers, e.g. *Host), keyed by Kind.
type Tx interface {
	// Get returns the resource of kind k with the id, or ENOTFOUND.
	Get(ctx context.Context, k Kind, id string) (Resource, error)
	// GetMany returns the resources of kind k with the ids that exist, in
	// any order; it is how lists load related resources without N+1 queries.
	GetMany(ctx context.Context, k Kind, ids []string) ([]Resource, error)
	// List returns one page of resources of kind k matching q, and the
	// number matching q regardless of paging.
	List(ctx context.Context, k Kind, q Query) (items []Resource, total int, err error)
	// Count returns how many resources of kind k match q (paging ignored).
	Count(ctx context.Context, k Kind, q Query) (int, error)
	// CountBy returns how many resources of kind k match q (paging
	// ignored) for each combination of the values of fields that occurs:
	// JSON names of stored text, enum or reference fields (an absent
	// reference is ""), or of stored JSON fields (metadata), whose value is
	// their stored JSON text (equal lists are one group; the text need not
	// be the one written). The order of the groups is unspecified.
	CountBy(ctx context.Context, k Kind, q Query, fields ...string) ([]Group, error)

	// Create stores a new resource. When its ResourceID is empty a fresh ID is
	// generated (retrying on the rare collision); the transaction's project
	// and the timestamps are set by the store. A uniqueness violation is
	// ECONFLICT naming the field.
	Create(ctx context.Context, r Resource) error
	// Update replaces every stored field of an existing resource and bumps
	// UpdatedAt; ENOTFOUND when it does not exist. A resource read before
	// (its UpdatedAt set) is written only over the version that was read:
	// when another transaction changed it since, the transaction is run
	// again (see Store.Update), so a stale row is never written back.
	Update(ctx context.Context, r Resource) error
	// UpdateFields writes the named fields of r (JSON names; a stored
	// field hidden from the API by its column, e.g. "node_secret_hash")
	// to the stored resource with r's ID and bumps its UpdatedAt; every
	// other field stays as stored, whoever changed it since r was read. It
	// does not read the row first, so writers of different fields of one
	// resource (the API renaming a host, the host module recording its
	// status) neither undo nor wait out each other's change. ENOTFOUND
	// when the resource does not exist; EINVALID for a name that is not a
	// stored field of the kind or one the store keeps (resourceId, the
	// project, the timestamps). On success r's Project and timestamps are
	// as stored. A row of a kind the store caches across transactions is
	// written only over the version that was read, as by Update.
	UpdateFields(ctx context.Context, r Resource, fields ...string) error
	// UpdateFieldsIf is UpdateFields that writes only while the stored
	// resource meets every condition of when (exact matches, as
	// Query.Where; hidden fields by their column): a compare-and-set of
	// what the caller read and decided on. A resource that exists but no
	// longer meets them was changed by another writer since it was read,
	// and the transaction is run again, as for any write that lost a race.
	UpdateFieldsIf(ctx context.Context, r Resource, when []Cond, fields ...string) error
	// Delete removes a resource; ENOTFOUND when it does not exist.
	Delete(ctx context.Context, k Kind, id string) error
}

// NodeCredentials are the fields of a host that decide whether its node may
// authenticate (see Host.NodeSecretHash and Host.NodeCredGen); node
// authentication reads them from the per-host view (package hostview).
type NodeCredentials struct {
	HostID       string
	Project      string
	DesiredState HostState
	SecretHash   string
	Gen          int64
}

// Revoked reports whether the node may no longer authenticate: its host is
// being invalidated or deleted, or has no credentials.
func (c NodeCredentials) Revoked() bool {
	return c.DesiredState == HostStateUntrusted || c.DesiredState == HostStateDeleted || c.SecretHash == ""
}

// LastSeen is when a host's node was last heard from.
type LastSeen struct {
	Project string
	HostID  string
	At      time.Time
}

// Member is a running server process of a deployment (see Store.Announce).
type Member struct {
	ID      string   // unique per process (the server's --replica-id)
	Modules []string // the modules it runs
	Started Time
	Expires Time // set by the store
}

// Query selects resources of one kind.
type Query struct {
	// Filter is an AIP-160 expression over the kind's fields (see the
	// filter package); "" matches everything.
	Filter string
	// OrderBy is an AIP-132 list ("name desc, resourceId"); "" orders by
	// resource ID.
	OrderBy string
	// Where are exact-match conditions ANDed with Filter, for programmatic
	// use (e.g. the sites of a region).
	Where []Cond
	// Any are exact-match conditions of which at least one must hold (ORed
	// together, ANDed with the rest), e.g. the profiles targeting an
	// instance, its site or one of their regions; none: no such condition.
	Any []Cond
	// Variant, for a kind that holds several API types (Schema.Variant),
	// keeps the resources of that variant; "" keeps all.
	Variant string
	// Limit is the page size; 0 means no limit. Offset skips that many.
	Limit, Offset int
	// NoTotal tells List that the caller does not need the number of
	// matches: it returns -1 as the total instead of counting them, unless
	// the page itself tells it. Lookups (Limit 1 or 2) set it.
	NoTotal bool
}

// Group is one combination of values of CountBy's fields (in their
// order) and how many resources have it.
type Group struct {
	Values []string
	Count  int
}

// Cond is an exact-match condition on a stored top-level field. Field is the
// JSON name; a Value of "" or nil matches an empty/absent value, and a
// []string matches any of its elements.
type Cond struct {
	Field string
	Value any
}

// Op is what happened to a resource.
type Op string

const (
	OpCreated Op = "CREATED"
	OpUpdated Op = "UPDATED"
	OpDeleted Op = "DELETED"
)

// Event is one entry of the change feed. It names the resource; consumers
// read its current state (level-based), so events carry no payload.
type Event struct {
	Revision int64  `json:"revision"`
	Project  string `json:"project"`
	Kind     Kind   `json:"kind"`
	ID       string `json:"resourceId"`
	Op       Op     `json:"op"`
	Time     Time   `json:"time"`
}

// KindProject appears only in the change feed, never as a resource: a
// project created (OpCreated) or deleted (OpDeleted, after the delete
// events of its resources). The event's Project and ID are the project's
// name. Modules that provision every project (the OS catalog) watch it.
const KindProject Kind = "project"

// Project is a tenant. Its Name appears in API paths; its ID (a UUID) is what
// role names carry ("<id>_im-rw"), as in the original's Keycloak realm.
type Project struct {
	Name      string          `json:"name"`
	ID        string          `json:"id"`
	CreatedAt Time            `json:"createdAt"`
	Settings  ProjectSettings `json:"settings"`
	// Deleting is set once the project's deletion has started (see
	// TenantStore): it takes no new resources.
	Deleting bool `json:"-"`
}

// ProjectSettings are a project's onboarding choices (more modules add
// theirs). The zero value is the safe default: unknown devices refused, no
// zero-touch provisioning.
type ProjectSettings struct {
	// DefaultOSID turns on zero-touch provisioning (nZTP): a host onboarded
	// without an instance gets one with this OS (and DefaultLocalAccountID,
	// DefaultCustomConfigIDs) from the onboarding module.
	DefaultOSID            string   `json:"defaultOsId,omitempty"`
	DefaultLocalAccountID  string   `json:"defaultLocalAccountId,omitempty"`
	DefaultCustomConfigIDs []string `json:"defaultCustomConfigIds,omitempty"`
	// EnrollmentTokenHash is the lower-case hex SHA-256 of the project's
	// enrollment token; "" refuses devices that were not pre-registered. A
	// device presenting the token is created as a REGISTERED host, or
	// ONBOARDED when AutoOnboardEnrolled. The API never shows the hash.
	EnrollmentTokenHash string `json:"enrollmentTokenHash,omitempty"`
	AutoOnboardEnrolled bool   `json:"autoOnboardEnrolled,omitempty"`
	// HeartbeatIntervalSeconds is how often the project's nodes send a
	// heartbeat, and HeartbeatTimeoutSeconds how long without one makes a
	// host "No Connection"; 0 means the server's default (10 s, and three
	// missed intervals). See MinHeartbeatInterval and friends.
	HeartbeatIntervalSeconds uint32 `json:"heartbeatIntervalSeconds,omitempty"`
	HeartbeatTimeoutSeconds  uint32 `json:"heartbeatTimeoutSeconds,omitempty"`
	// OSSecurityFeatureEnable gives zero-touch instances their OS's
	// security feature (secure boot and full-disk encryption where the OS
	// profile has it), as the original's default provider config did.
	OSSecurityFeatureEnable bool `json:"osSecurityFeatureEnable,omitempty"`
	// ExporterPerHostOff leaves the project's hosts out of the exporter's
	// per-host series (edge_host_*), which cost ~27 series a host; the
	// aggregates (eim_hosts …) still count them.
	ExporterPerHostOff bool `json:"exporterPerHostOff,omitempty"`
	// EdgeWorkloadsAllowPrivileged lets the project's edge workloads run
	// privileged containers and use the host's network (refused
	// otherwise: such a pod owns the device).
	EdgeWorkloadsAllowPrivileged bool `json:"edgeWorkloadsAllowPrivileged,omitempty"`
	// PowerPolicy is the power policy of the project's hosts whose BMC
	// and site set none (see PowerPolicy; "" unset: REPORT).
	PowerPolicy PowerPolicy `json:"powerPolicy,omitempty"`
	// Description is the project's display name: the original tenant
	// manager's spec.description, which its web UI shows in place of the
	// name ("" shows the name). Set by PUT /v1/projects/{name}.
	Description string `json:"description,omitempty"`
}

// MaxProjectDescription bounds ProjectSettings.Description, in bytes.
const MaxProjectDescription = 256

// Bounds of the heartbeat settings. The timeout must cover at least two
// intervals, or one late heartbeat would flag a healthy host.
const (
	DefaultHeartbeatInterval = 10
	DefaultHeartbeatMisses   = 3
	MinHeartbeatInterval     = 5
	MaxHeartbeatInterval     = 3600
	MaxHeartbeatTimeout      = 86400
)

// DefaultProject is created on first start.
const DefaultProject = "default"
