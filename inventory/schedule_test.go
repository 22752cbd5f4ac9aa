package inventory_test

import (
	"slices"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func TestListSchedules(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		root := e.region("root", "")
		sub := e.region("sub", root.ResourceID)
		other := e.region("other", "")
		site := e.site("s", sub.ResourceID)
		site2 := e.site("s2", other.ResourceID)
		h := e.host("h", site.ResourceID)
		h2 := e.host("h2", site2.ResourceID)

		// 2026-11-23 is a Monday.
		mon := uint64(time.Date(2026, 11, 23, 2, 30, 0, 0, time.UTC).Unix())
		single := func(name string, start, end uint64, host, site, region string) string {
			return e.create(&eim.SingleSchedule{Name: name, ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: uint32(start), EndSeconds: uint32(end),
				TargetHostID: host, TargetSiteID: site, TargetRegionID: region}).Base().ResourceID
		}
		repeated := func(name, hours, dow string, host, site, region string) string {
			return e.create(&eim.RepeatedSchedule{Name: name, ScheduleStatus: "SCHEDULE_STATUS_OS_UPDATE", DurationSeconds: 3600,
				CronMinutes: "0", CronHours: hours, CronDayMonth: "*", CronMonth: "*", CronDayWeek: dow,
				TargetHostID: host, TargetSiteID: site, TargetRegionID: region}).Base().ResourceID
		}
		sHost := single("host", mon-100, mon+100, h.ResourceID, "", "")
		sSite := single("site", mon+1000, 0, "", site.ResourceID, "")
		sRoot := single("root", mon-5000, 0, "", "", root.ResourceID)
		sOther := single("other", mon-100, mon+100, h2.ResourceID, "", "")
		rSub := repeated("sub-mon-2am", "2", "1", "", "", sub.ResourceID)   // open 02:00-03:00 Mondays
		rHost := repeated("host-tue-2am", "2", "2", h.ResourceID, "", "")   // Tuesdays only
		rOther := repeated("other-2am", "2", "*", "", "", other.ResourceID) // other tree

		ids := func(s *inventory.Schedules) []string {
			var out []string
			for _, x := range s.Single {
				out = append(out, x.ResourceID)
			}
			for _, x := range s.Repeated {
				out = append(out, x.ResourceID)
			}
			slices.Sort(out)
			return out
		}
		sorted := func(v ...string) []string { slices.Sort(v); return v }
		cases := []struct {
			name string
			q    inventory.ScheduleQuery
			want []string
		}{
			{"all", inventory.ScheduleQuery{PageSize: 100}, sorted(sHost, sSite, sRoot, sOther, rSub, rHost, rOther)},
			{"host tree", inventory.ScheduleQuery{HostID: h.ResourceID}, sorted(sHost, sSite, sRoot, rSub, rHost)},
			{"site tree", inventory.ScheduleQuery{SiteID: site.ResourceID}, sorted(sSite, sRoot, rSub)},
			{"region tree", inventory.ScheduleQuery{RegionID: sub.ResourceID}, sorted(sRoot, rSub)},
			{"root only", inventory.ScheduleQuery{RegionID: root.ResourceID}, sorted(sRoot)},
			{"host at time", inventory.ScheduleQuery{HostID: h.ResourceID, UnixEpoch: mon, HasEpoch: true}, sorted(sHost, sRoot, rSub)},
			{"all at time", inventory.ScheduleQuery{UnixEpoch: mon, HasEpoch: true}, sorted(sHost, sRoot, sOther, rSub, rOther)},
			{"after windows", inventory.ScheduleQuery{UnixEpoch: mon + 3600, HasEpoch: true}, sorted(sSite, sRoot)},
			{"single end is exclusive", inventory.ScheduleQuery{HostID: h2.ResourceID, UnixEpoch: mon + 100, HasEpoch: true}, sorted(rOther)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got := ok(e.svc.ListSchedules(e.ctx, e.proj, c.q)).get(t)
				if g := ids(got); !slices.Equal(g, c.want) || got.Total != len(c.want) {
					t.Errorf("got %v (total %d), want %v", g, got.Total, c.want)
				}
			})
		}

		// "null": schedules without that kind of target.
		nulls := []struct {
			name string
			q    inventory.ScheduleQuery
			want []string
		}{
			{"no host target", inventory.ScheduleQuery{HostID: "null"}, sorted(sSite, sRoot, rSub, rOther)},
			{"no host or region target", inventory.ScheduleQuery{HostID: "null", RegionID: "null"}, sorted(sSite)},
			{"site tree without region targets", inventory.ScheduleQuery{SiteID: site.ResourceID, RegionID: "null"}, sorted(sSite)},
		}
		for _, c := range nulls {
			t.Run(c.name, func(t *testing.T) {
				got := ok(e.svc.ListSchedules(e.ctx, e.proj, c.q)).get(t)
				if g := ids(got); !slices.Equal(g, c.want) || got.Total != len(c.want) {
					t.Errorf("got %v (total %d), want %v", g, got.Total, c.want)
				}
			})
		}
		pg0 := ok(e.svc.ListSchedulesOf(e.ctx, e.proj, eim.KindSingleSchedule, inventory.ScheduleQuery{HostID: "null"})).get(t)
		if pg0.Total != 2 {
			t.Errorf("singles without host target: got %d, want 2", pg0.Total)
		}

		// Paging runs over singles then repeated ones.
		p1 := ok(e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{PageSize: 3})).get(t)
		p2 := ok(e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{PageSize: 3, Offset: 3})).get(t)
		p3 := ok(e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{PageSize: 3, Offset: 6})).get(t)
		if len(p1.Single) != 3 || len(p1.Repeated) != 0 || !p1.HasNext || p1.Total != 7 {
			t.Errorf("page 1: got %d+%d next %v total %d", len(p1.Single), len(p1.Repeated), p1.HasNext, p1.Total)
		}
		if len(p2.Single) != 1 || len(p2.Repeated) != 2 || !p2.HasNext {
			t.Errorf("page 2: got %d+%d next %v", len(p2.Single), len(p2.Repeated), p2.HasNext)
		}
		if len(p3.Single)+len(p3.Repeated) != 1 || p3.HasNext {
			t.Errorf("page 3: got %d+%d next %v", len(p3.Single), len(p3.Repeated), p3.HasNext)
		}
		if p1.Single[0].TargetHost == nil && p1.Single[0].TargetSite == nil && p1.Single[0].TargetRegion == nil {
			t.Errorf("schedule targets not expanded: %+v", p1.Single[0])
		}

		// One kind.
		pg := ok(e.svc.ListSchedulesOf(e.ctx, e.proj, eim.KindRepeatedSchedule, inventory.ScheduleQuery{HostID: h.ResourceID})).get(t)
		if pg.Total != 2 || len(pg.Items) != 2 || pg.HasNext {
			t.Errorf("repeated of host: got %d/%d next %v, want 2", len(pg.Items), pg.Total, pg.HasNext)
		}
		pg = ok(e.svc.ListSchedulesOf(e.ctx, e.proj, eim.KindSingleSchedule, inventory.ScheduleQuery{PageSize: 2, Offset: 1})).get(t)
		if pg.Total != 4 || len(pg.Items) != 2 || !pg.HasNext {
			t.Errorf("singles page: got %d/%d next %v, want 2/4 true", len(pg.Items), pg.Total, pg.HasNext)
		}

		_, err := e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{HostID: "site-0000abcd"})
		wantErr(t, err, eim.EINVALID, "hostId")
		_, err = e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{HostID: "host-0000beef"})
		wantErr(t, err, eim.ENOTFOUND, "hostId")
		_, err = e.svc.ListSchedules(e.ctx, e.proj, inventory.ScheduleQuery{PageSize: 101})
		wantErr(t, err, eim.EINVALID, "pageSize")
		_, err = e.svc.ListSchedulesOf(e.ctx, e.proj, eim.KindHost, inventory.ScheduleQuery{})
		wantErr(t, err, eim.EINVALID)
		_, err = e.svc.Create(e.ctx, e.proj, &eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 1, TargetSiteID: "site-0000beef"})
		wantErr(t, err, eim.ENOTFOUND, "targetSiteId")
	})
}

func TestRepeatedScheduleWindows(t *testing.T) {
	at := func(y int, m time.Month, d, h, min, s int) uint64 {
		return uint64(time.Date(y, m, d, h, min, s, 0, time.UTC).Unix())
	}
	cases := []struct {
		name                     string
		min, hour, dom, mon, dow string
		dur                      uint32
		t                        uint64
		want                     bool
	}{
		{"inside", "30", "23", "*", "*", "*", 3600, at(2026, 11, 24, 23, 45, 0), true},
		{"start is inclusive", "30", "23", "*", "*", "*", 3600, at(2026, 11, 24, 23, 30, 0), true},
		{"end is exclusive", "30", "23", "*", "*", "*", 3600, at(2026, 11, 25, 0, 30, 0), false},
		{"across midnight", "30", "23", "*", "*", "*", 7200, at(2026, 11, 25, 0, 45, 0), true},
		{"across year end", "0", "23", "31", "12", "*", 86400, at(2027, 1, 1, 12, 0, 0), true},
		{"before", "30", "23", "*", "*", "*", 3600, at(2026, 11, 24, 23, 29, 59), false},
		{"minute list", "0,15,45", "*", "*", "*", "*", 60, at(2026, 11, 24, 7, 15, 30), true},
		{"minute list miss", "0,15,45", "*", "*", "*", "*", 60, at(2026, 11, 24, 7, 30, 30), false},
		{"dom or dow: dow", "0", "2", "1", "*", "1", 3600, at(2026, 11, 23, 2, 10, 0), true}, // a Monday, not the 1st
		{"dom or dow: dom", "0", "2", "1", "*", "1", 3600, at(2026, 12, 1, 2, 10, 0), true},  // a Tuesday, the 1st
		{"dom or dow: neither", "0", "2", "1", "*", "1", 3600, at(2026, 11, 24, 2, 10, 0), false},
		{"dow only", "0", "2", "*", "*", "0", 3600, at(2026, 11, 22, 2, 59, 59), true}, // a Sunday
		{"wrong month", "0", "2", "*", "1", "*", 3600, at(2026, 11, 22, 2, 10, 0), false},
		{"full day", "0", "0", "*", "*", "*", 86400, at(2026, 11, 22, 23, 59, 59), true},
	}
	run(t, func(t *testing.T, e *env) {
		r := e.region("r", "")
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := e.with(t)
				id := e.create(&eim.RepeatedSchedule{Name: c.name, ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: c.dur,
					CronMinutes: c.min, CronHours: c.hour, CronDayMonth: c.dom, CronMonth: c.mon, CronDayWeek: c.dow,
					TargetRegionID: r.ResourceID}).Base().ResourceID
				defer func() { noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindRepeatedSchedule, id)) }()
				p := ok(e.svc.ListSchedulesOf(e.ctx, e.proj, eim.KindRepeatedSchedule, inventory.ScheduleQuery{UnixEpoch: c.t, HasEpoch: true})).get(t)
				if got := p.Total == 1; got != c.want {
					t.Errorf("open at %s: got %v, want %v", time.Unix(int64(c.t), 0).UTC(), got, c.want)
				}
			})
		}
	})
}

// TestClearScheduleTarget: a schedule's target may be cleared, as in the
// original (the schedule then applies to nothing); two targets stay refused.
func TestClearScheduleTarget(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		site := e.site("s", "")
		s := e.create(&eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 1, TargetSiteID: site.ResourceID}).(*eim.SingleSchedule)
		got := ok(e.svc.Update(e.ctx, e.proj, &eim.SingleSchedule{Meta: eim.Meta{ResourceID: s.ResourceID}}, []string{"targetSiteId"})).get(t).(*eim.SingleSchedule)
		if got.TargetSiteID != "" || got.TargetSite != nil {
			t.Errorf("cleared target: got %q %v", got.TargetSiteID, got.TargetSite)
		}
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindSite, site.ResourceID)) // no longer targeted
		r := e.region("r", "")
		h := e.host("h", "")
		_, err := e.svc.Update(e.ctx, e.proj, &eim.SingleSchedule{Meta: eim.Meta{ResourceID: s.ResourceID}, TargetRegionID: r.ResourceID, TargetHostID: h.ResourceID},
			[]string{"targetRegionId", "targetHostId"})
		wantErr(t, err, eim.EINVALID, "only one of")
	})
}
