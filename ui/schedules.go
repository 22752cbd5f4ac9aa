package ui

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/window"
)

// scheduleRow is a single or repeated schedule as the pages list it.
type scheduleRow struct {
	ID, Name, Kind, Status, Target, When string
	Open                                 bool
	single                               *window.Single
	repeated                             *window.Repeated
}

func scheduleRows(s *inventory.Schedules, now time.Time) []scheduleRow {
	var out []scheduleRow
	for _, x := range s.Single {
		w := window.Single{Start: int64(x.StartSeconds), End: int64(x.EndSeconds)}
		open, _ := w.OpenAt(now.Unix())
		when := "from " + unixTime(uint64(x.StartSeconds))
		if x.EndSeconds != 0 {
			when += " to " + unixTime(uint64(x.EndSeconds))
		}
		out = append(out, scheduleRow{ID: x.ResourceID, Name: x.Name, Kind: "single", Status: shortEnum(x.ScheduleStatus),
			Target: target(x.TargetHostID, x.TargetSiteID, x.TargetRegionID), When: when, Open: open, single: &w})
	}
	for _, x := range s.Repeated {
		w := window.Repeated{Duration: x.DurationSeconds, Minutes: x.CronMinutes, Hours: x.CronHours,
			DayOfMonth: x.CronDayMonth, Month: x.CronMonth, DayOfWeek: x.CronDayWeek}
		open, _ := w.OpenAt(now.Unix())
		when := fmt.Sprintf("cron %s %s %s %s %s (UTC), %s each", x.CronMinutes, x.CronHours, x.CronDayMonth, x.CronMonth, x.CronDayWeek,
			time.Duration(x.DurationSeconds)*time.Second)
		out = append(out, scheduleRow{ID: x.ResourceID, Name: x.Name, Kind: "repeated", Status: shortEnum(x.ScheduleStatus),
			Target: target(x.TargetHostID, x.TargetSiteID, x.TargetRegionID), When: when, Open: open, repeated: &w})
	}
	return out
}

func target(host, site, region string) string {
	return cmp.Or(host, site, region, "—")
}

// calDay is a day of the calendar and the windows that open in it.
type calDay struct {
	Date    string
	Label   string
	InMonth bool
	Today   bool
	Windows []calWindow
}

type calWindow struct {
	Name, Kind, Time string
}

type schedulesData struct {
	View       string // week | month
	Title      string
	Weekdays   []string
	Weeks      [][]calDay
	Prev, Next string
	Other      string // link to the other view
	Rows       []scheduleRow
	Regions    []*eim.Region
	Sites      []*eim.Site
	Msg        string
	Error      string
	Form       url.Values
	Target     string // the place whose windows are shown ("" = all)
}

// maxWindowsPerDay bounds what a day cell lists (a window every minute
// would fill it).
const maxWindowsPerDay = 6

func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.schedulesData(r, c, r.URL.Query())
	if err != nil {
		return err
	}
	d.Msg = r.URL.Query().Get("created")
	if d.Msg != "" {
		d.Msg = "Created schedule " + d.Msg + "."
	}
	h.page(w, r, c, "schedules", "Schedules", d)
	return nil
}

func (h *Handler) schedulesData(r *http.Request, c *call, q url.Values) (*schedulesData, error) {
	ctx := r.Context()
	proj := c.project.Name
	now := h.now().UTC()
	d := &schedulesData{View: cmp.Or(q.Get("view"), "month"), Weekdays: []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}}
	if d.View != "week" && d.View != "month" {
		return nil, eim.Errorf(eim.EINVALID, "view: want week or month")
	}
	at := now
	if s := q.Get("at"); s != "" {
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return nil, eim.Errorf(eim.EINVALID, "at: want a date as 2006-01-02")
		}
		at = t
	}
	day := func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC) }
	monday := func(t time.Time) time.Time { return day(t).AddDate(0, 0, -((int(t.Weekday()) + 6) % 7)) }
	var start, end time.Time
	var prev, next time.Time
	if d.View == "week" {
		start = monday(at)
		end = start.AddDate(0, 0, 7)
		prev, next = start.AddDate(0, 0, -7), end
		d.Title = "Week of " + start.Format("2 January 2006")
	} else {
		first := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		start = monday(first)
		last := first.AddDate(0, 1, 0)
		end = monday(last.AddDate(0, 0, -1)).AddDate(0, 0, 7)
		prev, next = first.AddDate(0, -1, 0), last
		d.Title = first.Format("January 2006")
	}
	// A place: the windows that apply to it (its own, and those of the
	// places above it), as a node asks for its plan.
	var sq inventory.ScheduleQuery
	switch d.Target = q.Get("target"); {
	case d.Target == "":
	case eim.ValidID(eim.KindHost, d.Target):
		sq.HostID = d.Target
	case eim.ValidID(eim.KindSite, d.Target):
		sq.SiteID = d.Target
	case eim.ValidID(eim.KindRegion, d.Target):
		sq.RegionID = d.Target
	default:
		return nil, eim.Errorf(eim.EINVALID, "target: %q is not a host, site or region ID", d.Target)
	}
	tq := ""
	if d.Target != "" {
		tq = "&target=" + url.QueryEscape(d.Target)
	}
	base := "/ui/p/" + url.PathEscape(proj) + "/schedules?view=" + d.View + tq + "&at="
	d.Prev, d.Next = base+prev.Format("2006-01-02"), base+next.Format("2006-01-02")
	other := "week"
	if d.View == "week" {
		other = "month"
	}
	d.Other = "/ui/p/" + url.PathEscape(proj) + "/schedules?view=" + other + tq + "&at=" + at.Format("2006-01-02")

	var all inventory.Schedules
	for offset := 0; offset <= inventory.MaxOffset; offset += inventory.MaxPageSize {
		sq.PageSize, sq.Offset = inventory.MaxPageSize, offset
		page, err := h.inv.ListSchedules(ctx, proj, sq)
		if err != nil {
			return nil, err
		}
		all.Single = append(all.Single, page.Single...)
		all.Repeated = append(all.Repeated, page.Repeated...)
		if !page.HasNext {
			break
		}
	}
	d.Rows = scheduleRows(&all, now)
	var week []calDay
	for t := start; t.Before(end); t = t.AddDate(0, 0, 1) {
		cd := calDay{Date: t.Format("2006-01-02"), Label: strconv.Itoa(t.Day()), InMonth: d.View == "week" || t.Month() == at.Month(), Today: t.Equal(day(now))}
		cd.Windows = windowsOn(d.Rows, t.Unix(), t.AddDate(0, 0, 1).Unix())
		week = append(week, cd)
		if len(week) == 7 {
			d.Weeks = append(d.Weeks, week)
			week = nil
		}
	}
	{
		regions, err := h.inv.List(ctx, proj, eim.KindRegion, inventory.ListQuery{OrderBy: "name", PageSize: inventory.MaxPageSize})
		if err != nil {
			return nil, err
		}
		for _, it := range regions.Items {
			d.Regions = append(d.Regions, it.(*eim.Region))
		}
		sites, err := h.inv.List(ctx, proj, eim.KindSite, inventory.ListQuery{OrderBy: "name", PageSize: inventory.MaxPageSize})
		if err != nil {
			return nil, err
		}
		for _, it := range sites.Items {
			d.Sites = append(d.Sites, it.(*eim.Site))
		}
	}
	return d, nil
}

// windowsOn lists the windows that open in [from, to), or, for single
// windows, that overlap it.
func windowsOn(rows []scheduleRow, from, to int64) []calWindow {
	var out []calWindow
	for _, s := range rows {
		switch {
		case s.single != nil:
			if s.single.Start < to && (s.single.End == 0 || s.single.End > from) {
				out = append(out, calWindow{Name: s.Name, Kind: "single", Time: time.Unix(max(s.single.Start, from), 0).UTC().Format("15:04")})
			}
		case s.repeated != nil:
			n := 0
			for t := from; ; {
				opens, ok := s.repeated.Next(t)
				if !ok || opens >= to {
					break
				}
				if n++; n > maxWindowsPerDay {
					out = append(out, calWindow{Name: s.Name, Kind: "repeated", Time: "…"})
					break
				}
				out = append(out, calWindow{Name: s.Name, Kind: "repeated", Time: time.Unix(opens, 0).UTC().Format("15:04")})
				t = opens + 60
			}
		}
	}
	return out
}

// createSchedule creates a single or a repeated schedule from the form.
func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request, c *call) error {
	proj := c.project.Name
	f := r.PostForm
	name := strings.TrimSpace(f.Get("name"))
	status := eim.ScheduleStatus(cmp.Or(f.Get("status"), "SCHEDULE_STATUS_MAINTENANCE"))
	var host, site, region string
	tgt := f.Get("target")
	if one := strings.TrimSpace(f.Get("host")); one != "" {
		if !eim.ValidID(eim.KindHost, one) {
			if len(one) > 32 {
				one = one[:32] + "…"
			}
			return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "host: %q is not a host ID (host- and 8 hex digits)", one))
		}
		tgt = one
	}
	switch {
	case strings.HasPrefix(tgt, "site-"):
		site = tgt
	case strings.HasPrefix(tgt, "region-"):
		region = tgt
	case strings.HasPrefix(tgt, "host-"):
		host = tgt
	default:
		return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "target: choose a region, a site or a host"))
	}
	var res eim.Resource
	var path string
	names := []string{"name", "scheduleStatus", "targetHostId", "targetSiteId", "targetRegionId"}
	switch f.Get("kind") {
	case "repeated":
		dur, err := strconv.ParseUint(f.Get("durationMinutes"), 10, 32)
		if err != nil {
			return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "duration: minutes, a whole number from 1 to 1440"))
		}
		res = &eim.RepeatedSchedule{Name: name, ScheduleStatus: status, DurationSeconds: uint32(dur * 60),
			CronMinutes: cmp.Or(strings.TrimSpace(f.Get("cronMinutes")), "0"), CronHours: cmp.Or(strings.TrimSpace(f.Get("cronHours")), "*"),
			CronDayMonth: cmp.Or(strings.TrimSpace(f.Get("cronDayMonth")), "*"), CronMonth: cmp.Or(strings.TrimSpace(f.Get("cronMonth")), "*"),
			CronDayWeek: cmp.Or(strings.TrimSpace(f.Get("cronDayWeek")), "*"), TargetHostID: host, TargetSiteID: site, TargetRegionID: region}
		path = "/schedules/repeated"
		names = append(names, "durationSeconds", "cronMinutes", "cronHours", "cronDayMonth", "cronMonth", "cronDayWeek")
	case "single":
		start, err := time.Parse("2006-01-02T15:04", f.Get("start"))
		if err != nil {
			return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "start: want a date and time (UTC)"))
		}
		s := &eim.SingleSchedule{Name: name, ScheduleStatus: status, StartSeconds: uint32(start.Unix()), TargetHostID: host, TargetSiteID: site, TargetRegionID: region}
		if e := f.Get("end"); e != "" {
			end, err := time.Parse("2006-01-02T15:04", e)
			if err != nil {
				return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "end: want a date and time (UTC), or nothing"))
			}
			s.EndSeconds = uint32(end.Unix())
		}
		res = s
		path = "/schedules/single"
		names = append(names, "startSeconds", "endSeconds")
	default:
		return h.scheduleFormError(w, r, c, eim.Errorf(eim.EINVALID, "kind: single or repeated"))
	}
	id, err := h.apiCreate(r, c, path, res, names...)
	if err != nil {
		return h.scheduleFormError(w, r, c, err)
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(proj)+"/schedules?created="+url.QueryEscape(id), http.StatusSeeOther)
	return nil
}

// scheduleFormError shows the calendar again with the form's error and
// what was typed.
func (h *Handler) scheduleFormError(w http.ResponseWriter, r *http.Request, c *call, err error) error {
	if statusOf(err) == http.StatusInternalServerError {
		return err
	}
	d, derr := h.schedulesData(r, c, url.Values{})
	if derr != nil {
		return derr
	}
	d.Error, d.Form = eim.ErrorMessage(err), r.PostForm
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(err), "schedules", c.view("schedules", "Schedules", d))
	return nil
}
