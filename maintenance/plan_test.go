package maintenance_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/maintenance"
	"github.com/eimhq/eim/sqlstore"
)

// TestPlansShared: hosts whose plans are the same (one site, OS and
// policy) share one plan object of the tree instead of a copy each; a
// host with a window of its own gets its own.
func TestPlansShared(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateProject(ctx, &eim.Project{Name: "p", ID: "2a9d3c9e-8c4f-4d5e-9a6b-000000000001"}); err != nil {
		t.Fatal(err)
	}
	var site, host string
	err = st.Update(ctx, "p", func(tx eim.Tx) error {
		s := &eim.Site{Name: "plant"}
		if err := tx.Create(ctx, s); err != nil {
			return err
		}
		site = s.ResourceID
		if err := tx.Create(ctx, &eim.RepeatedSchedule{Name: "nightly", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 3600,
			CronMinutes: "0", CronHours: "2", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetSiteID: site}); err != nil {
			return err
		}
		h := &eim.Host{Name: "edge", UUID: "4c4c4544-0000-4000-8000-00000000aa01", SiteID: site}
		if err := tx.Create(ctx, h); err != nil {
			return err
		}
		host = h.ResourceID
		return tx.Create(ctx, &eim.SingleSchedule{Name: "swap", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 1_800_000_000, TargetHostID: host})
	})
	if err != nil {
		t.Fatal(err)
	}
	var tree *maintenance.Tree
	if err := st.View(ctx, "p", func(tx eim.Tx) error { tree, err = maintenance.LoadTree(ctx, tx); return err }); err != nil {
		t.Fatal(err)
	}
	a, va := tree.Plan(maintenance.Facts{HostID: "host-0000bb01", SiteID: site})
	b, vb := tree.Plan(maintenance.Facts{HostID: "host-0000bb02", SiteID: site})
	if a != b || va != vb || va != a.Version || len(a.Windows) != 1 {
		t.Fatalf("two hosts of one site: plans %p %p, versions %s %s, %d windows; want one shared plan with the site's window", a, b, va, vb, len(a.Windows))
	}
	own, vo := tree.Plan(maintenance.Facts{HostID: host, SiteID: site})
	if own == a || vo == va || len(own.Windows) != 2 {
		t.Fatalf("a host with a window of its own: shared %v, %d windows", own == a, len(own.Windows))
	}
}
