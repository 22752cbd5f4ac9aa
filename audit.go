package eim

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
)

// The audit log: every change of a resource — through the API, by a node's
// call or by a module's decision — is recorded with who made it, in the
// transaction of the change (see Store.Audit). A write that rolls back
// leaves no record.

// Action is what an audit record says happened: the Op of the change.
type Action = Op

// AuditRecord is one change of one resource.
type AuditRecord struct {
	// Seq numbers the project's records 1, 2, 3… (higher is later),
	// whatever other projects write; a project's records become visible
	// in Seq order, so it is what a follower resumes after ("seq>N")
	// without missing one. Numbers are not reused: records pruned by age
	// leave the next one where it was.
	Seq     int64  `json:"seq" db:"seq"`
	Project string `json:"-" db:"project"`
	Time    Time   `json:"time" db:"at"`
	// Principal is who made the change: "user:<token subject>",
	// "node:<host ID>" (a node's own call), "module:<name>" (a manager's
	// decision) or "system" (the server itself, e.g. at start-up).
	Principal  string `json:"principal" db:"principal"`
	Action     string `json:"action" db:"action"`
	Kind       Kind   `json:"kind" db:"kind"`
	ResourceID string `json:"resourceId" db:"resource_id"`
	// Changes are the fields written, by JSON name (a field hidden from the
	// API by its column name): old → new. A create has no old values, a
	// delete no fields. Secrets show as Redacted.
	Changes map[string]Change `json:"changes" db:"changes"`
}

// Change is the value of one field before and after a write (JSON; null
// when absent).
type Change struct {
	Old json.RawMessage `json:"old"`
	New json.RawMessage `json:"new"`
}

// Redacted stands for a secret's value in an audit record: the record says
// that it changed, never what it is.
const Redacted = `"[redacted]"`

// ResourceKind and Base make AuditRecord's schema (AuditSchema) derivable
// like a resource's; it is not a resource and has no Meta.
func (*AuditRecord) ResourceKind() Kind { return KindAudit }
func (*AuditRecord) Base() *Meta        { return &Meta{} }

// KindAudit names the audit log in filters and messages; it is not a kind
// of the Store's resources (Kinds does not list it).
const KindAudit Kind = "audit"

// AuditSchema is the schema AIP-160 filters of the audit log are checked
// against: resourceId, kind, principal, action and time (and seq).
var AuditSchema = sync.OnceValue(func() *Schema {
	s := &Schema{Kind: KindAudit, Table: "audit_log", Plural: "auditRecords", Type: reflect.TypeFor[AuditRecord](), byName: map[string]*Field{}}
	addFields(s, s.Type, nil)
	return s
})

// Secret reports whether a stored field's value must not appear in the
// audit log: fields hidden from the API (node credentials, digests) and
// any whose name says it is a secret.
func Secret(f *Field) bool {
	return f.Name == "" || SecretName(f.Name)
}

// SecretName reports whether a field of that JSON name holds a secret.
func SecretName(name string) bool { return secretNames[name] }

var secretNames = map[string]bool{"secret": true, "password": true, "token": true, "enrollmentTokenHash": true}

type actorKey struct{}

// WithActor returns ctx carrying who acts (see AuditRecord.Principal): the
// store records it with the changes made under ctx.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor ctx carries, or "system".
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "system"
}

// UserActor, NodeActor and ModuleActor are the principals of audit
// records.
func UserActor(subject string) string { return "user:" + subject }
func NodeActor(hostID string) string  { return "node:" + hostID }
func ModuleActor(name string) string  { return "module:" + name }
