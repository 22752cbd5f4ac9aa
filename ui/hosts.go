package ui

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The host list's state lives in its URL (tab, state, filter, q, region,
// sort, dir, offset, size, cols), so that a view can be bookmarked and
// shared; the server pages, sorts and filters, so a page costs the same at
// 100,000 hosts as at 100.

// hostTab is a quick tab: a name and its filter.
type hostTab struct{ Key, Label, Filter string }

var hostTabs = []hostTab{
	{"all", "All", ""},
	{"provisioned", "Provisioned", "has(instance)"},
	{"onboarded", "Onboarded", "currentState=HOST_STATE_ONBOARDED AND NOT has(instance)"},
	{"registered", "Registered", "currentState!=HOST_STATE_ONBOARDED"},
}

// hostColumn is a column of the host table; Sort is its orderBy field
// ("" when the column cannot be sorted on).
type hostColumn struct {
	Key, Label, Sort string
	Default          bool
}

var hostColumns = []hostColumn{
	{"name", "Name", "name", true},
	{"id", "ID", "resourceId", false},
	{"serial", "Serial", "serialNumber", true},
	{"uuid", "UUID", "uuid", false},
	{"status", "Status", "hostStatus", true},
	{"site", "Site", "", true},
	{"region", "Region", "", false},
	{"os", "OS", "", true},
	{"instance", "Instance state", "", false},
	{"provisioning", "Provisioning", "", true},
	{"update", "Update", "", false},
	{"lastseen", "Last change", "hostStatusTimestamp", false},
	{"lastheard", "Last heard", "", true},
}

const (
	defaultHostPage = 50
	// maxExportRows bounds a CSV export: the API's deepest offset and a
	// page beyond it.
	maxExportRows = inventory.MaxOffset + inventory.MaxPageSize
)

// reSearch is what the free-text search accepts: the characters of names,
// serial numbers, UUIDs and IDs.
var reSearch = regexp.MustCompile(`^[A-Za-z0-9._:/ -]{0,50}$`)

// hostQuery is the host list's URL state.
type hostQuery struct {
	Tab, State, Filter, Q, Region, Sort, Dir string
	Offset, Size                             int
	Cols                                     []string
}

func parseHostQuery(q url.Values) (hostQuery, error) {
	hq := hostQuery{Tab: cmp.Or(q.Get("tab"), "all"), State: q.Get("state"), Filter: strings.TrimSpace(q.Get("filter")),
		Q: strings.TrimSpace(q.Get("q")), Region: q.Get("region"), Sort: q.Get("sort"), Dir: q.Get("dir"), Size: defaultHostPage}
	if !slices.ContainsFunc(hostTabs, func(t hostTab) bool { return t.Key == hq.Tab }) {
		return hq, eim.Errorf(eim.EINVALID, "tab: %q is not one of all, provisioned, onboarded, registered", hq.Tab)
	}
	if hq.State != "" && stateFilter(hq.State) == "" && hq.State != "maintenance" {
		return hq, eim.Errorf(eim.EINVALID, "state: unknown state %q", hq.State)
	}
	if !reSearch.MatchString(hq.Q) {
		return hq, eim.Errorf(eim.EINVALID, "search: use letters, digits, spaces and . _ : / - only (at most 50); for anything else write a filter")
	}
	if hq.Region != "" && !eim.ValidID(eim.KindRegion, hq.Region) {
		return hq, eim.Errorf(eim.EINVALID, "region: %q is not a region ID", hq.Region)
	}
	var err error
	if s := q.Get("offset"); s != "" {
		if hq.Offset, err = strconv.Atoi(s); err != nil || hq.Offset < 0 || hq.Offset > inventory.MaxOffset {
			return hq, eim.Errorf(eim.EINVALID, "offset: want 0 to %d; narrow the list with a filter to see further", inventory.MaxOffset)
		}
	}
	if s := q.Get("size"); s != "" {
		if hq.Size, err = strconv.Atoi(s); err != nil || hq.Size < 1 || hq.Size > inventory.MaxPageSize {
			return hq, eim.Errorf(eim.EINVALID, "size: want 1 to %d", inventory.MaxPageSize)
		}
	}
	if hq.Sort != "" && !slices.ContainsFunc(hostColumns, func(c hostColumn) bool { return c.Key == hq.Sort && c.Sort != "" }) {
		return hq, eim.Errorf(eim.EINVALID, "sort: cannot sort on %q", hq.Sort)
	}
	if hq.Dir != "" && hq.Dir != "asc" && hq.Dir != "desc" {
		return hq, eim.Errorf(eim.EINVALID, "dir: want asc or desc")
	}
	for _, c := range q["col"] {
		if slices.ContainsFunc(hostColumns, func(hc hostColumn) bool { return hc.Key == c }) && !slices.Contains(hq.Cols, c) {
			hq.Cols = append(hq.Cols, c)
		}
	}
	if len(hq.Cols) == 0 {
		for _, c := range hostColumns {
			if c.Default {
				hq.Cols = append(hq.Cols, c.Key)
			}
		}
	}
	return hq, nil
}

// values is the URL state of hq, without its defaults.
func (hq hostQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	if hq.Tab != "all" {
		set("tab", hq.Tab)
	}
	set("state", hq.State)
	set("filter", hq.Filter)
	set("q", hq.Q)
	set("region", hq.Region)
	set("sort", hq.Sort)
	set("dir", hq.Dir)
	if hq.Offset > 0 {
		v.Set("offset", strconv.Itoa(hq.Offset))
	}
	if hq.Size != defaultHostPage {
		v.Set("size", strconv.Itoa(hq.Size))
	}
	if !hq.defaultCols() {
		v["col"] = hq.Cols
	}
	return v
}

func (hq hostQuery) defaultCols() bool {
	var def []string
	for _, c := range hostColumns {
		if c.Default {
			def = append(def, c.Key)
		}
	}
	return slices.Equal(def, hq.Cols)
}

// filter is the AIP-160 filter of the whole URL state: every part in
// parentheses, joined by AND.
func (h *Handler) hostFilter(r *http.Request, project string, hq hostQuery) (string, error) {
	var parts []string
	add := func(f string) {
		if f != "" {
			parts = append(parts, "("+f+")")
		}
	}
	for _, t := range hostTabs {
		if t.Key == hq.Tab {
			add(t.Filter)
		}
	}
	if hq.State == "maintenance" {
		f, _, err := h.maintenanceFilter(r, project)
		if err != nil {
			return "", err
		}
		if f == "" {
			f = `resourceId="host-00000000"` // no window is open: no host
		}
		add(f)
	} else {
		add(stateFilter(hq.State))
	}
	if hq.Region != "" {
		add(regionSubtree(hq.Region))
	}
	if hq.Q != "" {
		var or []string
		for _, f := range []string{"name", "serialNumber", "uuid", "resourceId", "hostname"} {
			or = append(or, fmt.Sprintf("%s=%q", f, hq.Q))
		}
		add(strings.Join(or, " OR "))
	}
	add(hq.Filter)
	return strings.Join(parts, " AND "), nil
}

func (hq hostQuery) orderBy() string {
	for _, c := range hostColumns {
		if c.Key == hq.Sort && c.Sort != "" {
			if hq.Dir == "desc" {
				return c.Sort + " desc, resourceId"
			}
			return c.Sort + ", resourceId"
		}
	}
	return "name, resourceId"
}

type hostsData struct {
	Q        hostQuery
	Tabs     []tabLink
	Columns  []colHead
	AllCols  []colChoice
	Rows     []hostRow
	Total    int
	From, To int
	Prev     string
	Next     string
	CSV      string
	Error    string
	Hidden   []hidden // the URL state the filter form must keep
	Sites    []*eim.Site
	Regions  []*eim.Region
	StateLbl string
	Self     string
}

type tabLink struct {
	Label, Link string
	Current     bool
}

type colHead struct {
	Label, Link, Sorted string // Sorted: "", "ascending", "descending"
}

type colChoice struct {
	Key, Label string
	On         bool
}

type hidden struct{ Name, Value string }

type hostRow struct {
	ID    string
	Link  string
	Cells []cell
}

type cell struct {
	Text, Class, Title, Link string
	DateTime                 string // a time: Text relative, Title absolute
}

// lastHeard reads when the host module last recorded hearing from each
// of the hosts' nodes (the store's last-seen times: any replica's). A
// failure leaves the times out, not the page.
func (h *Handler) lastHeard(ctx context.Context, hosts []eim.Resource) map[string]time.Time {
	if h.store == nil || len(hosts) == 0 {
		return nil
	}
	ids := make([]string, len(hosts))
	for i, it := range hosts {
		ids[i] = it.Base().ResourceID
	}
	seen, err := h.store.LastSeenOf(ctx, ids)
	if err != nil {
		h.log.Warn("ui: read last-seen times", "error", err)
		return nil
	}
	out := make(map[string]time.Time, len(seen))
	for _, ls := range seen {
		out[ls.HostID] = ls.At
	}
	return out
}

func (h *Handler) hosts(w http.ResponseWriter, r *http.Request, c *call) error {
	proj := c.project.Name
	hq, qerr := parseHostQuery(r.URL.Query())
	d := &hostsData{Q: hq}
	status := http.StatusOK
	var page *inventory.Page
	if qerr == nil {
		var err error
		page, err = h.hostPage(r, proj, hq)
		if err != nil && eim.ErrorCode(err) != eim.EINVALID {
			return err
		}
		qerr = err
	}
	if qerr != nil {
		d.Error = eim.ErrorMessage(qerr)
		status = http.StatusBadRequest
	}
	h.fillHostsData(r.Context(), d, proj, page)
	regions, _, err := listAll[*eim.Region](r, h.inv, proj, eim.KindRegion)
	if err != nil {
		return err
	}
	d.Regions = regions
	if c.canWrite {
		sites, err := h.inv.List(r.Context(), proj, eim.KindSite, inventory.ListQuery{OrderBy: "name", PageSize: inventory.MaxPageSize})
		if err != nil {
			return err
		}
		for _, s := range sites.Items {
			d.Sites = append(d.Sites, s.(*eim.Site))
		}
	}
	v := c.view("hosts", "Hosts", d)
	v.Live = true
	h.render(w, r, status, "hosts", v)
	return nil
}

// hostPage reads a page of the list: a built-in view (tab, state,
// search) from the fleet's summary in memory and its rows by ID; a
// filter typed by the user, a region, or any view while the summary is
// not live, from the store.
func (h *Handler) hostPage(r *http.Request, proj string, hq hostQuery) (*inventory.Page, error) {
	if h.fleet.live() && hq.Filter == "" && hq.Region == "" && hq.State != "maintenance" {
		ids, total := h.fleet.page(proj, hostView{tab: hq.Tab, state: hq.State, q: hq.Q, sort: hq.Sort, desc: hq.Dir == "desc"}, hq.Offset, hq.Size)
		hosts, err := h.hostsByID(r, proj, ids)
		if err != nil {
			return nil, err
		}
		page := &inventory.Page{Total: total, HasNext: hq.Offset+len(ids) < total}
		for _, x := range hosts {
			page.Items = append(page.Items, x)
		}
		return page, nil
	}
	f, err := h.hostFilter(r, proj, hq)
	if err != nil {
		return nil, err
	}
	return h.inv.List(r.Context(), proj, eim.KindHost, inventory.ListQuery{Filter: f, OrderBy: hq.orderBy(), PageSize: hq.Size, Offset: hq.Offset})
}

func (h *Handler) fillHostsData(ctx context.Context, d *hostsData, proj string, page *inventory.Page) {
	hq := d.Q
	d.Self = hostsURL(proj, hq.values())
	for _, t := range hostTabs {
		q := hq
		q.Tab, q.Offset = t.Key, 0
		d.Tabs = append(d.Tabs, tabLink{Label: t.Label, Link: hostsURL(proj, q.values()), Current: t.Key == hq.Tab})
	}
	for _, s := range hostStates {
		if s.Key == hq.State {
			d.StateLbl = s.Label
		}
	}
	if hq.State == "maintenance" {
		d.StateLbl = "In maintenance"
	}
	for _, key := range hq.Cols {
		col := columnOf(key)
		head := colHead{Label: col.Label}
		if col.Sort != "" {
			q := hq
			q.Sort, q.Dir, q.Offset = key, "asc", 0
			if hq.Sort == key && hq.Dir != "desc" {
				q.Dir = "desc"
				head.Sorted = "ascending"
			} else if hq.Sort == key {
				head.Sorted = "descending"
			}
			head.Link = hostsURL(proj, q.values())
		}
		d.Columns = append(d.Columns, head)
	}
	for _, c := range hostColumns {
		d.AllCols = append(d.AllCols, colChoice{Key: c.Key, Label: c.Label, On: slices.Contains(hq.Cols, c.Key)})
	}
	for k, vs := range hq.values() {
		if k == "filter" || k == "q" || k == "col" || k == "offset" || k == "region" {
			continue
		}
		for _, v := range vs {
			d.Hidden = append(d.Hidden, hidden{k, v})
		}
	}
	slices.SortFunc(d.Hidden, func(a, b hidden) int { return strings.Compare(a.Name, b.Name) })
	csvQ := hq.values()
	csvQ.Del("offset")
	csvQ.Del("size")
	d.CSV = "/ui/p/" + url.PathEscape(proj) + "/hosts.csv?" + csvQ.Encode()
	if page == nil {
		return
	}
	d.Total = page.Total
	if len(page.Items) > 0 {
		d.From, d.To = hq.Offset+1, hq.Offset+len(page.Items)
	}
	if hq.Offset > 0 {
		q := hq
		q.Offset = max(0, hq.Offset-hq.Size)
		d.Prev = hostsURL(proj, q.values())
	}
	if page.HasNext && hq.Offset+hq.Size <= inventory.MaxOffset {
		q := hq
		q.Offset = hq.Offset + hq.Size
		d.Next = hostsURL(proj, q.values())
	}
	var heard map[string]time.Time
	if slices.Contains(hq.Cols, "lastheard") {
		heard = h.lastHeard(ctx, page.Items)
	}
	now := h.now()
	for _, it := range page.Items {
		host := it.(*eim.Host)
		row := hostRow{ID: host.ResourceID, Link: hostURL(proj, host.ResourceID)}
		for _, key := range hq.Cols {
			if key == "lastheard" {
				hv := heardOf(heard[host.ResourceID], now)
				row.Cells = append(row.Cells, cell{Text: hv.Ago, Title: hv.Abs, DateTime: hv.DateTime})
				continue
			}
			row.Cells = append(row.Cells, hostCell(key, host))
		}
		d.Rows = append(d.Rows, row)
	}
}

func columnOf(key string) hostColumn {
	for _, c := range hostColumns {
		if c.Key == key {
			return c
		}
	}
	return hostColumn{Key: key, Label: key}
}

func hostURL(project, id string) string {
	return "/ui/p/" + url.PathEscape(project) + "/hosts/" + url.PathEscape(id)
}

// hostCell is one cell of the table (and, as text, of the CSV export).
func hostCell(key string, h *eim.Host) cell {
	in := h.Instance
	switch key {
	case "name":
		return cell{Text: cmp.Or(h.Name, h.ResourceID)}
	case "id":
		return cell{Text: h.ResourceID}
	case "serial":
		return cell{Text: h.SerialNumber}
	case "uuid":
		return cell{Text: h.UUID}
	case "status":
		return cell{Text: h.HostStatus, Class: indicatorClass(h.HostStatusIndicator), Title: indicatorText(h.HostStatusIndicator)}
	case "site":
		if h.Site != nil {
			return cell{Text: h.Site.Name}
		}
		return cell{Text: "—"}
	case "region":
		if h.Site != nil && h.Site.Region != nil {
			return cell{Text: h.Site.Region.Name}
		}
		return cell{Text: "—"}
	case "os":
		if in != nil && in.OS != nil {
			return cell{Text: in.OS.Name}
		}
		return cell{Text: "—"}
	case "instance":
		if in != nil {
			return cell{Text: shortEnum(in.CurrentState)}
		}
		return cell{Text: "—"}
	case "provisioning":
		if in != nil {
			return cell{Text: in.ProvisioningStatus, Class: indicatorClass(in.ProvisioningStatusIndicator), Title: indicatorText(in.ProvisioningStatusIndicator)}
		}
		return cell{Text: "—"}
	case "update":
		if in != nil {
			return cell{Text: in.UpdateStatus, Class: indicatorClass(in.UpdateStatusIndicator), Title: indicatorText(in.UpdateStatusIndicator)}
		}
		return cell{Text: "—"}
	case "lastseen":
		return cell{Text: unixTime(h.HostStatusTimestamp)}
	}
	return cell{}
}

// hostsCSV exports the hosts of the current filter, every column chosen.
func (h *Handler) hostsCSV(w http.ResponseWriter, r *http.Request, c *call) error {
	proj := c.project.Name
	hq, err := parseHostQuery(r.URL.Query())
	if err != nil {
		return err
	}
	f, err := h.hostFilter(r, proj, hq)
	if err != nil {
		return err
	}
	first, err := h.inv.List(r.Context(), proj, eim.KindHost, inventory.ListQuery{Filter: f, OrderBy: hq.orderBy(), PageSize: inventory.MaxPageSize})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="hosts-`+proj+`.csv"`)
	if first.Total > maxExportRows {
		w.Header().Set("X-Eim-Export-Truncated", fmt.Sprintf("%d of %d hosts; narrow the filter", maxExportRows, first.Total))
	}
	cw := csv.NewWriter(w)
	var head []string
	for _, k := range hq.Cols {
		head = append(head, columnOf(k).Label)
	}
	_ = cw.Write(head)
	page := first
	for offset := 0; ; {
		var heard map[string]time.Time
		if slices.Contains(hq.Cols, "lastheard") {
			heard = h.lastHeard(r.Context(), page.Items)
		}
		for _, it := range page.Items {
			var rec []string
			for _, k := range hq.Cols {
				if k == "lastheard" {
					rec = append(rec, heardOf(heard[it.Base().ResourceID], time.Time{}).Abs)
					continue
				}
				rec = append(rec, csvSafe(hostCell(k, it.(*eim.Host)).Text))
			}
			_ = cw.Write(rec)
		}
		offset += len(page.Items)
		if !page.HasNext || len(page.Items) == 0 || offset > inventory.MaxOffset {
			break
		}
		page, err = h.inv.List(r.Context(), proj, eim.KindHost, inventory.ListQuery{Filter: f, OrderBy: hq.orderBy(), PageSize: inventory.MaxPageSize, Offset: offset})
		if err != nil {
			// The header is out: end the file where it failed.
			h.log.Warn("ui: CSV export cut short", "project", proj, "error", err)
			break
		}
	}
	cw.Flush()
	return nil
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
