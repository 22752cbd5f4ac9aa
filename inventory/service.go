// Package inventory holds the business rules of EIM's inventory, written once
// over the eim.Store port so they behave the same on every engine: defaults,
// validation, who may write which field, desired-state transitions,
// references between resources, two-phase deletes of hosts and instances,
// and the "expanded" read view of resources the API returns.
//
// Every check-then-write runs inside one Store.Update transaction, and
// writes only over what it checked that another writer may change
// meanwhile (else the transaction runs again). The API writes desired
// fields through Service; the modules write current state and status
// through the field-scoped operations of this package (see status.go),
// each writing only its columns.
package inventory

import (
	"context"
	"iter"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/seal"
)

// Options configure a Service. Zero values select defaults.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// Batcher, when set, group-commits creates: concurrent creates of one
	// project share a transaction (see Batcher). Nil writes each alone.
	Batcher *Batcher
	// WebhookURLs is what webhook URLs may point at (the server's
	// --webhook-allow-private).
	WebhookURLs eim.URLPolicy
	// Secrets seals webhooks' secrets before they are stored (nil: kept
	// as given).
	Secrets *seal.Key
}

// Service applies the inventory's rules to a store.
type Service struct {
	store   eim.Store
	logger  *slog.Logger
	now     func() time.Time
	batcher *Batcher

	webhookURLs eim.URLPolicy
	secrets     *seal.Key
}

// New returns a Service over store.
func New(store eim.Store, opts Options) *Service {
	s := &Service{store: store, logger: opts.Logger, now: opts.Now, batcher: opts.Batcher, webhookURLs: opts.WebhookURLs, secrets: opts.Secrets}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// write runs fn in a read-write transaction of project: through the
// batcher when there is one (fn must then be re-runnable), else alone.
func (s *Service) write(ctx context.Context, project string, fn func(eim.Tx) error) error {
	if s.batcher != nil {
		return s.batcher.DoIn(ctx, project, fn)
	}
	return s.store.Update(ctx, project, fn)
}

// Store returns the store the service works on, for the server's wiring
// and tests; the API asks the Service itself (Ready, Revision, Watch).
func (s *Service) Store() eim.Store { return s.store }

// Ready reports whether the store answers (nil) or not (EUNAVAILABLE):
// what a readiness probe asks.
func (s *Service) Ready(ctx context.Context) error {
	if _, err := s.store.Revision(ctx); err != nil {
		return eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable")
	}
	return nil
}

// Revision returns the newest revision of the change feed.
func (s *Service) Revision(ctx context.Context) (int64, error) { return s.store.Revision(ctx) }

// Watch yields the change feed's events after revision after, of the
// kinds given (all when none), until ctx ends (see eim.Store.Watch).
func (s *Service) Watch(ctx context.Context, after int64, kinds ...eim.Kind) iter.Seq2[eim.Event, error] {
	return s.store.Watch(ctx, after, kinds...)
}

// Paging limits of the API.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
	MaxOffset       = 10000
)

// checkPage validates paging and returns the effective page size.
func checkPage(size, offset int) (int, error) {
	if size == 0 {
		size = DefaultPageSize
	}
	if size < 1 || size > MaxPageSize {
		return 0, eim.Errorf(eim.EINVALID, "pageSize must be between 1 and %d", MaxPageSize)
	}
	if offset < 0 || offset > MaxOffset {
		return 0, eim.Errorf(eim.EINVALID, "offset must be between 0 and %d", MaxOffset)
	}
	return size, nil
}

// checkProject refuses an empty project on API paths: "" would see every
// tenant.
func checkProject(project string) error {
	if project == "" {
		return eim.Errorf(eim.EINVALID, "project is required")
	}
	return nil
}

// checkKindID validates that id is a well-formed ID of the kind k.
func checkKindID(k eim.Kind, id string) error {
	if eim.SchemaOf(k) == nil {
		return eim.Errorf(eim.EINVALID, "unknown resource kind %q", k)
	}
	return eim.CheckID(k, "resourceId", id)
}

// clone returns a shallow copy of r.
func clone[T eim.Resource](r T) T {
	v := reflect.New(reflect.TypeOf(r).Elem())
	v.Elem().Set(reflect.ValueOf(r).Elem())
	return v.Interface().(T)
}

// normalizeEnums sets every empty enum field to its zero name
// ("…_UNSPECIFIED"), so stored rows and filters see one spelling. Fields
// of another variant than r's stay empty (they are not r's).
func normalizeEnums(r eim.Resource) {
	sc := eim.SchemaOf(r.ResourceKind())
	variant := sc.VariantOf(r)
	for _, f := range sc.Fields {
		if !f.IsEnum() || f.Type.Kind() != reflect.String || !f.In(variant) {
			continue
		}
		fv := f.Value(r)
		if fv.String() == "" {
			vals := reflect.Zero(f.Type).Interface().(eim.Enum).Values()
			fv.SetString(vals[0])
		}
	}
}

// copyWritable copies the writable fields named (all when names is nil) from
// src to dst.
func copyWritable(dst, src eim.Resource, names []string) {
	sc := eim.SchemaOf(src.ResourceKind())
	for _, f := range sc.Fields {
		if !f.Writable {
			continue
		}
		if names != nil && !contains(names, f.Name) {
			continue
		}
		f.Value(dst).Set(f.Value(src))
	}
}

// resolveMask turns a field mask (wire names, camelCase or snake_case) into
// the writable fields' JSON names. Unknown and read-only fields, and fields
// of another variant, are EINVALID.
func resolveMask(k eim.Kind, variant string, mask []string) ([]string, error) {
	if mask == nil {
		return nil, nil
	}
	sc := eim.SchemaOf(k)
	out := make([]string, 0, len(mask))
	for _, name := range mask {
		f, ok := sc.Field(name)
		if !ok || !f.In(variant) {
			return nil, eim.Errorf(eim.EINVALID, "fieldMask: unknown field %q", name)
		}
		if !f.Writable {
			return nil, eim.Errorf(eim.EINVALID, "fieldMask: field %q is read-only", name)
		}
		out = append(out, f.Name)
	}
	return out, nil
}

// updatable are, for the kinds whose API updates change only some of their
// writable fields, those fields: the rest of a PUT or PATCH body is
// ignored, as in the original. An OS resource keeps what identifies its
// image (URL, checksum, profile, type, provider, security feature) from
// its creation: instances were, or are being, installed from it.
var updatable = map[eim.Kind][]string{
	eim.KindOS: {"name", "architecture", "metadata"},
}

// Updatable returns the fields of k an update may change when they are
// fewer than its writable fields (ok false: all of them), so that a form
// offers only what the update will write.
func Updatable(k eim.Kind) (fields []string, ok bool) {
	f, ok := updatable[k]
	return slices.Clone(f), ok
}

// restrictMask narrows an update's mask (nil: every writable field) to the
// fields of k that updates may change.
func restrictMask(k eim.Kind, mask []string) []string {
	allowed, ok := updatable[k]
	if !ok {
		return mask
	}
	if mask == nil {
		return allowed
	}
	out := []string{}
	for _, f := range mask {
		if contains(allowed, f) {
			out = append(out, f)
		}
	}
	return out
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ids returns the distinct non-empty values of key over items.
func ids[T any](items []T, key func(T) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range items {
		if id := key(it); id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
