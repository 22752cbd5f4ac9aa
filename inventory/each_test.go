package inventory_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/eimhq/eim"
)

// TestEach: every host once, in ID order, across pages (more than one of
// Each's pages of 1,000), expanded as List expands them (the metadata it
// inherits from its site), and fn's error ends the walk.
func TestEach(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		kv := func(k, v string) eim.MetadataItem { return eim.MetadataItem{Key: k, Value: v} }
		r := e.region("r", "", kv("line", "7"))
		s := e.site("s", r.ResourceID)
		const n = 2345
		var want []string
		err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			for i := range n {
				h := &eim.Host{Name: fmt.Sprintf("h-%d", i), UUID: newUUID(), SiteID: s.ResourceID}
				if err := tx.Create(e.ctx, h); err != nil {
					return err
				}
				want = append(want, h.ResourceID)
			}
			return nil
		})
		noErr(t, err)
		slices.Sort(want)
		var got []string
		noErr(t, e.svc.Each(e.ctx, e.proj, eim.KindHost, func(r eim.Resource) error {
			h := r.(*eim.Host)
			if h.Site == nil || h.Site.ResourceID != s.ResourceID {
				t.Fatalf("host %s: not expanded with its site: %+v", h.ResourceID, h.Site)
			}
			if fmt.Sprint(h.InheritedMetadata) != fmt.Sprint(eim.Metadata{kv("line", "7")}) {
				t.Fatalf("host %s inherits %v, want line=7", h.ResourceID, h.InheritedMetadata)
			}
			got = append(got, h.ResourceID)
			return nil
		}))
		if !slices.Equal(got, want) {
			t.Fatalf("Each saw %d hosts (first %v), want the %d in ID order", len(got), got[:min(3, len(got))], len(want))
		}

		stop := errors.New("enough")
		seen := 0
		err = e.svc.Each(e.ctx, e.proj, eim.KindHost, func(eim.Resource) error {
			if seen++; seen == 1500 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || seen != 1500 {
			t.Fatalf("Each after fn's error: %v, %d seen; want the error after 1500", err, seen)
		}

		if err := e.svc.Each(e.ctx, e.proj, "nosuchkind", func(eim.Resource) error { return nil }); eim.ErrorCode(err) != eim.EINVALID {
			t.Fatalf("Each of an unknown kind: %v, want invalid", err)
		}
	})
}
