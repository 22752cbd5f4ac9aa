package ui

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/inventory"
)

// fleet is the UI's summary of every host, a projection over the
// process's read model (hostview.Project): what the overview counts and
// what the host list's built-in views (tabs, states, the search box)
// select and sort, so that they cost a pass over memory rather than
// scans of the hosts and instances tables (at 100,000 hosts, a state's
// COUNT over a substring filter or an instance subquery reads every
// row). It keeps counts and indices of the view's records, never copies
// of them: a host costs its places in byName (and in the sorted orders
// and the search text once asked for). The rows of a page are still read
// from the store, by their IDs, and a filter typed by the user always
// runs in the store. While the view is not live or has not read the
// whole fleet (at start, while the database is away) the pages ask the
// store for everything.
type fleet struct {
	view *hostview.View
	own  bool // the view is the fleet's own (a UI without a process's)
	// ordered is set once the fleet is whole (the view primed) and byName
	// sorted: until then hosts are appended as the read ahead brings them.
	ordered atomic.Bool

	mu  sync.RWMutex
	prj map[string]*prjSum // by project
}

// prjSum is a project's hosts and their counts, kept as hosts come and go
// so that the overview reads them rather than counting.
type prjSum struct {
	byName []*hostview.Host // ordered by name, then ID: the list's default order
	// loading holds the hosts, by ID, until the fleet is whole: byName is
	// then made of them, in order, once.
	loading map[string]*hostview.Host
	states  [len(stateKeys)]int
	// views counts the hosts of each tab (tabKeys) in all (column 0) and
	// in each state (column i+1 for stateKeys[i]).
	views [len(tabKeys)][len(stateKeys) + 1]int
	upd   inventory.UpdateCounts
	updOS map[string]*inventory.UpdateCounts // by OS resource ID
	// sites counts the hosts of each site ("": none), in all (column 0)
	// and in each state (column i+1), kept as byName's counts are: the
	// locations page reads them rather than passing over the hosts.
	sites map[string]*[len(stateKeys) + 1]int
	// sorted holds the hosts in the ascending order of a sortable column
	// other than the name (sortKey), built the first time a page asks
	// for it and kept in order from then on as byName is: a page of a
	// sorted view is then a walk from either end, not a pass over every
	// host with a heap.
	sorted map[string][]*hostview.Host
	// text is the hosts' searched fields in one buffer, for the search
	// box: built on the first search, dropped when a host comes, goes or
	// changes a searched field.
	text *searchText
}

// searchText is every host's searched fields (searchOf), each followed
// by \x01, in one buffer, in the order of byName: a search is a scan of
// contiguous memory, and a match's text is its host's place in byName. A
// host's change that keeps its place (a status) keeps the text; one that
// moves it, or changes what is searched, drops it.
type searchText struct {
	buf  []byte
	ends []int    // the end of each host's text in buf
	ids  []string // the host of each text, to check the text is current
}

// maxSortedHits is how many hosts found by a search a page sorts by
// another column than the name; beyond, it walks that column's order.
const maxSortedHits = 20000

// search returns the hosts whose searched fields hold q (lower-case) and
// that match, in the order of byName; ok false when the project has no
// current text. p's lock is held.
func (p *prjSum) search(q string, match func(*hostview.Host) bool) ([]*hostview.Host, bool) {
	t := p.text
	if t == nil || len(t.ids) != len(p.byName) {
		return nil, false
	}
	if strings.ContainsAny(q, "\x00\x01") {
		return nil, true // no host's text holds these
	}
	needle := []byte(q)
	var out []*hostview.Host
	for pos := 0; pos < len(t.buf); {
		i := bytes.Index(t.buf[pos:], needle)
		if i < 0 {
			break
		}
		j, _ := slices.BinarySearch(t.ends, pos+i) // the text holding the match
		h := p.byName[j]
		if h.ID() != t.ids[j] {
			return nil, false
		}
		if match(h) {
			out = append(out, h)
		}
		pos = t.ends[j] + 1
	}
	return out, true
}

// searchOf is a host's searched fields, lower-case, joined by \x00.
func searchOf(h *hostview.Host) string {
	return strings.ToLower(strings.Join([]string{h.Name(), h.SerialNumber(), h.UUID(), h.ID(), h.Hostname()}, "\x00"))
}

// sameSearch reports whether a and b have the same searched fields.
func sameSearch(a, b *hostview.Host) bool {
	return a.Name() == b.Name() && a.SerialNumber() == b.SerialNumber() && a.UUID() == b.UUID() && a.ID() == b.ID() && a.Hostname() == b.Hostname()
}

// contains reports whether a host's searched fields hold q (lower-case).
func contains(h *hostview.Host, q string) bool {
	for _, f := range [...]string{h.Name(), h.SerialNumber(), h.UUID(), h.ID(), h.Hostname()} {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}

// newFleet returns the fleet as a projection over v (a view of its own,
// which it runs, when own).
func newFleet(v *hostview.View, own bool) *fleet {
	f := &fleet{view: v, own: own, prj: map[string]*prjSum{}}
	v.Project(f.put)
	return f
}

// Run runs the fleet's own view, if it has one, until ctx ends: the
// process's view is run by the process.
func (f *fleet) Run(ctx context.Context) error {
	return hostview.RunAlong(ctx, f.view, f.own, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
}

// live reports whether the summary may be used: the view is followed
// and has read the whole fleet. The first time, it puts the hosts the
// read ahead appended in order.
func (f *fleet) live() bool {
	if f == nil || !f.view.Live() || !f.view.Primed() {
		return false
	}
	if !f.ordered.Load() {
		f.mu.Lock()
		if !f.ordered.Load() {
			for _, p := range f.prj {
				p.byName = slices.AppendSeq(p.byName[:0], maps.Values(p.loading))
				slices.SortFunc(p.byName, byName)
				p.loading, p.sorted, p.text = nil, nil, nil
			}
			f.ordered.Store(true)
		}
		f.mu.Unlock()
	}
	return true
}

// put replaces old (nil: none) by h (nil: none) in the indices and the
// counts: the view's projection.
func (f *fleet) put(old, h *hostview.Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ordered := f.ordered.Load()
	if old == nil || h == nil || !sameSearch(old, h) {
		for _, x := range []*hostview.Host{old, h} {
			if x != nil && f.prj[x.Project()] != nil {
				f.prj[x.Project()].text = nil
			}
		}
	}
	if old != nil {
		if p := f.prj[old.Project()]; p != nil {
			f.remove(p, old, h, ordered)
		}
	}
	if h == nil {
		return
	}
	p := f.prj[h.Project()]
	if p == nil {
		p = &prjSum{updOS: map[string]*inventory.UpdateCounts{}, sites: map[string]*[len(stateKeys) + 1]int{}}
		f.prj[h.Project()] = p
	}
	p.count(h, 1)
	switch {
	case !ordered:
		if p.loading == nil {
			p.loading = map[string]*hostview.Host{}
		}
		p.loading[h.ID()] = h
		return
	case old == nil || old.Project() != h.Project() || h.Name() != old.Name():
		i, _ := slices.BinarySearchFunc(p.byName, h, byName)
		p.byName = slices.Insert(p.byName, i, h)
	}
	for col, idx := range p.sorted {
		if old != nil && old.Project() == h.Project() && sameKey(col, h, old) {
			continue // replaced in its place by remove
		}
		i, _ := slices.BinarySearchFunc(idx, h, ascending[col])
		p.sorted[col] = slices.Insert(idx, i, h)
	}
}

// remove takes old out of p's counts and indices; h, when it replaces
// old at the same place of an index, takes that place. f.mu is held.
func (f *fleet) remove(p *prjSum, old, h *hostview.Host, ordered bool) {
	p.count(old, -1)
	if h != nil && h.Project() != old.Project() {
		h = nil
	}
	if !ordered {
		delete(p.loading, old.ID())
		if len(p.loading) == 0 {
			delete(f.prj, old.Project())
		}
		return
	}
	i, found := slices.BinarySearchFunc(p.byName, old, byName)
	switch {
	case !found:
	case h != nil && h.Name() == old.Name():
		p.byName[i] = h // in its place
	default:
		p.byName = slices.Delete(p.byName, i, i+1)
	}
	for col, idx := range p.sorted {
		less := ascending[col]
		i, found := slices.BinarySearchFunc(idx, old, less)
		switch {
		case !found:
		case h != nil && sameKey(col, h, old):
			idx[i] = h // in its place
			continue
		default:
			idx = slices.Delete(idx, i, i+1)
		}
		p.sorted[col] = idx
	}
	if len(p.byName) == 0 {
		delete(f.prj, old.Project())
	}
}

// sameKey reports whether a and b have the same value of column col.
func sameKey(col string, a, b *hostview.Host) bool {
	return a.ID() == b.ID() && ascending[col](a, b) == 0
}

func byName(a, b *hostview.Host) int {
	return cmp.Or(strings.Compare(a.Name(), b.Name()), strings.Compare(a.ID(), b.ID()))
}

// count adds (d = 1) or takes away (d = -1) a host's share of the counts.
func (p *prjSum) count(h *hostview.Host, d int) {
	bits, tabs := classify(h)
	for i := range stateKeys {
		if bits&(1<<i) != 0 {
			p.states[i] += d
		}
	}
	sc := p.sites[h.SiteID()]
	if sc == nil {
		sc = new([len(stateKeys) + 1]int)
		p.sites[h.SiteID()] = sc
	}
	sc[0] += d
	for i := range stateKeys {
		if bits&(1<<i) != 0 {
			sc[i+1] += d
		}
	}
	if sc[0] == 0 {
		delete(p.sites, h.SiteID())
	}
	for t := range tabKeys {
		if tabs&(1<<t) == 0 {
			continue
		}
		p.views[t][0] += d
		for i := range stateKeys {
			if bits&(1<<i) != 0 {
				p.views[t][i+1] += d
			}
		}
	}
	in := h.Instance()
	if in == nil {
		return
	}
	c := p.updOS[in.OSID()]
	if c == nil {
		c = &inventory.UpdateCounts{}
		p.updOS[in.OSID()] = c
	}
	for _, c := range []*inventory.UpdateCounts{&p.upd, c} {
		c.Total += d
		switch in.UpdateStatusIndicator() {
		case eim.StatusIdle:
			c.UpToDate += d
		case eim.StatusInProgress:
			c.Updating += d
		case eim.StatusError:
			c.Failed += d
		default:
			c.Unknown += d
		}
		if in.OSUpdateAvailable() {
			c.OSUpdateAvailable += d
		}
	}
	if c.Total == 0 {
		delete(p.updOS, in.OSID())
	}
}

// classify returns the states a host is in (bit i for stateKeys[i]) and
// the tabs it is on (bit i for tabKeys[i]).
func classify(h *hostview.Host) (bits uint16, tabs uint8) {
	for i, pred := range statePreds {
		if pred(h) {
			bits |= 1 << i
		}
	}
	for i, pred := range tabPreds {
		if pred(h) {
			tabs |= 1 << i
		}
	}
	return bits, tabs
}

// tabKeys are the keys of the tabs, in the order of their bits.
var tabKeys = [...]string{"all", "provisioned", "onboarded", "registered"}

// stateKeys are the keys of the states, in the order of their bits.
var stateKeys = [...]string{"running", "provisioning", "onboarding", "failed", "noconnection", "updating"}

// stateBit returns the bit of state key, 0 when it has none.
func stateBit(key string) uint16 {
	for i, k := range stateKeys {
		if k == key {
			return 1 << i
		}
	}
	return 0
}

// The built-in views as predicates over a host, in the order of
// stateKeys and tabKeys: the same selections as the filters of
// hostStates and hostTabs, which the pages use while the fleet is not
// live.
var statePreds = [len(stateKeys)]func(*hostview.Host) bool{
	func(h *hostview.Host) bool {
		return h.HostStatus() == "Running" && h.HostStatusIndicator() == eim.StatusIdle
	},
	func(h *hostview.Host) bool {
		return h.Instance() != nil && h.Instance().ProvisioningStatusIndicator() == eim.StatusInProgress
	},
	func(h *hostview.Host) bool {
		return h.DesiredState() == eim.HostStateOnboarded && h.CurrentState() != eim.HostStateOnboarded
	},
	func(h *hostview.Host) bool {
		in := h.Instance()
		return (in != nil && (in.ProvisioningStatusIndicator() == eim.StatusError || in.UpdateStatusIndicator() == eim.StatusError)) ||
			h.OnboardingStatusIndicator() == eim.StatusError || h.RegistrationStatusIndicator() == eim.StatusError ||
			(h.HostStatusIndicator() == eim.StatusError && h.HostStatus() != "No Connection")
	},
	func(h *hostview.Host) bool { return h.HostStatus() == "No Connection" },
	func(h *hostview.Host) bool {
		return h.Instance() != nil && h.Instance().UpdateStatusIndicator() == eim.StatusInProgress
	},
}

var tabPreds = [len(tabKeys)]func(*hostview.Host) bool{
	func(*hostview.Host) bool { return true },
	func(h *hostview.Host) bool { return h.Instance() != nil },
	func(h *hostview.Host) bool { return h.CurrentState() == eim.HostStateOnboarded && h.Instance() == nil },
	func(h *hostview.Host) bool { return h.CurrentState() != eim.HostStateOnboarded },
}

// counts returns the project's number of hosts and, per state, how many
// are in it, as kept.
func (f *fleet) counts(project string) (int, map[string]int) {
	out := make(map[string]int, len(stateKeys))
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.prj[project]
	if p == nil {
		return 0, out
	}
	for i, k := range stateKeys {
		out[k] = p.states[i]
	}
	return len(p.byName), out
}

// siteCounts returns, per site ID ("" for none), how many of the
// project's hosts it has, in all (key "") and per state, as kept.
func (f *fleet) siteCounts(project string) map[string]map[string]int {
	out := map[string]map[string]int{}
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.prj[project]
	if p == nil {
		return out
	}
	for site, sc := range p.sites {
		c := make(map[string]int, len(sc))
		c[""] = sc[0]
		for i, k := range stateKeys {
			c[k] = sc[i+1]
		}
		out[site] = c
	}
	return out
}

// updateCounts are the project's instances by update state, in all and
// per OS resource ID, as inventory.UpdatesSummary counts them.
func (f *fleet) updateCounts(project string) (inventory.UpdateCounts, map[string]*inventory.UpdateCounts) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]*inventory.UpdateCounts{}
	p := f.prj[project]
	if p == nil {
		return inventory.UpdateCounts{}, out
	}
	for id, c := range p.updOS {
		cc := *c
		out[id] = &cc
	}
	return p.upd, out
}

// sortKey orders hosts as the store orders them by a column of
// hostColumns, ascending or descending, then by ID.
func sortKey(col string, desc bool) func(a, b *hostview.Host) int {
	var by func(a, b *hostview.Host) int
	switch col {
	case "id":
		by = func(a, b *hostview.Host) int { return 0 }
	case "serial":
		by = func(a, b *hostview.Host) int { return strings.Compare(a.SerialNumber(), b.SerialNumber()) }
	case "uuid":
		by = func(a, b *hostview.Host) int { return strings.Compare(a.UUID(), b.UUID()) }
	case "status":
		by = func(a, b *hostview.Host) int { return strings.Compare(a.HostStatus(), b.HostStatus()) }
	case "lastseen":
		by = func(a, b *hostview.Host) int { return cmp.Compare(a.HostStatusTimestamp(), b.HostStatusTimestamp()) }
	default:
		by = func(a, b *hostview.Host) int { return strings.Compare(a.Name(), b.Name()) }
	}
	if desc {
		return func(a, b *hostview.Host) int { return cmp.Or(by(b, a), strings.Compare(a.ID(), b.ID())) }
	}
	return func(a, b *hostview.Host) int { return cmp.Or(by(a, b), strings.Compare(a.ID(), b.ID())) }
}

// hostView is a built-in view of the host list: a tab, a state ("" = any),
// a search ("" = none) and an order (a column of hostColumns, "" = name).
type hostView struct {
	tab, state, q, sort string
	desc                bool
}

// ascending are the orders of the sortable columns besides the name (whose
// order is byName), ascending: the orders of prjSum.sorted.
var ascending = map[string]func(a, b *hostview.Host) int{
	"id": sortKey("id", false), "serial": sortKey("serial", false), "uuid": sortKey("uuid", false),
	"status": sortKey("status", false), "lastseen": sortKey("lastseen", false),
}

// ensureOrder builds the project's index of the hosts in the ascending
// order of col (a key of ascending) unless it has it: a sort of the
// project's hosts, under the write lock, once; put keeps it from then on.
func (f *fleet) ensureOrder(project, col string) {
	less, ok := ascending[col]
	if !ok {
		return
	}
	f.mu.RLock()
	p := f.prj[project]
	built := p == nil || p.sorted[col] != nil
	f.mu.RUnlock()
	if built {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p = f.prj[project]; p == nil || p.sorted[col] != nil || !f.ordered.Load() {
		return
	}
	if p.sorted == nil {
		p.sorted = map[string][]*hostview.Host{}
	}
	idx := slices.Clone(p.byName)
	slices.SortFunc(idx, less)
	p.sorted[col] = idx
}

// ensureText builds the project's search text unless it has it, under the
// write lock.
func (f *fleet) ensureText(project string) {
	f.mu.RLock()
	p := f.prj[project]
	built := p == nil || p.text != nil
	f.mu.RUnlock()
	if built {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p = f.prj[project]; p == nil || p.text != nil || !f.ordered.Load() {
		return
	}
	t := &searchText{ends: make([]int, 0, len(p.byName)), ids: make([]string, 0, len(p.byName))}
	for _, h := range p.byName {
		t.buf = append(t.buf, searchOf(h)...)
		t.ends = append(t.ends, len(t.buf))
		t.buf = append(t.buf, 1)
		t.ids = append(t.ids, h.ID())
	}
	p.text = t
}

// page returns the IDs of the project's hosts in view v, from offset, at
// most limit; and how many are in it: a walk of the hosts in the view's
// order from either end. Without a search the view's count is kept, and
// the walk ends when the page is full; a search walks every host,
// counting the matches.
func (f *fleet) page(project string, v hostView, offset, limit int) ([]string, int) {
	si, ti := 0, slices.Index(tabKeys[:], cmp.Or(v.tab, "all"))
	if ti < 0 {
		return nil, 0
	}
	if stateBit(v.state) != 0 {
		si = slices.Index(stateKeys[:], v.state) + 1
	}
	q := strings.ToLower(v.q)
	// Only the view's predicates: a walk may visit many hosts.
	inView := func(h *hostview.Host) bool {
		return (ti == 0 || tabPreds[ti](h)) && (si == 0 || statePreds[si-1](h))
	}
	match := func(h *hostview.Host) bool { return inView(h) && (q == "" || contains(h, q)) }
	f.ensureOrder(project, v.sort)
	if q != "" {
		f.ensureText(project)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.prj[project]
	if p == nil {
		return nil, 0
	}
	order := p.byName
	if v.sort != "" && v.sort != "name" {
		if order = p.sorted[v.sort]; order == nil {
			// Reloaded since ensureOrder (or not a column of
			// ascending): one pass with a heap instead.
			return heapPage(p, v.sort, v.desc, match, offset, limit)
		}
	}
	if q != "" {
		// The search text has matched q: only the view is left to check.
		if found, ok := p.search(q, inView); ok && (v.sort == "" || v.sort == "name" || len(found) <= maxSortedHits) {
			// The hosts that hold the text, in the view's order.
			if v.sort != "" && v.sort != "name" {
				slices.SortFunc(found, ascending[v.sort])
			}
			if v.desc {
				slices.Reverse(found)
			}
			var ids []string
			for _, h := range found[min(offset, len(found)):min(offset+limit, len(found))] {
				ids = append(ids, h.ID())
			}
			return ids, len(found)
		}
	}
	counted := q == ""
	total := p.views[ti][si]
	if !counted {
		total = 0
	}
	var ids []string
	seen, n := 0, len(order)
	for i := range n {
		h := order[i]
		if v.desc {
			h = order[n-1-i]
		}
		if !match(h) {
			continue
		}
		if seen++; seen > offset && len(ids) < limit {
			ids = append(ids, h.ID())
		}
		if counted && (len(ids) == limit || seen == total) {
			break
		}
	}
	if !counted {
		total = seen
	}
	return ids, total
}

// heapPage is page by a pass over the project's hosts, keeping the first
// offset+limit matches in a bounded heap whose top is the greatest.
func heapPage(p *prjSum, col string, desc bool, match func(*hostview.Host) bool, offset, limit int) ([]string, int) {
	less := sortKey(col, desc)
	k := offset + limit
	h := &sumHeap{less: less}
	total := 0
	for _, s := range p.byName {
		if !match(s) {
			continue
		}
		total++
		if h.Len() < k {
			heap.Push(h, s)
		} else if k > 0 && less(s, h.s[0]) < 0 {
			h.s[0] = s
			heap.Fix(h, 0)
		}
	}
	pg := h.s
	slices.SortFunc(pg, less)
	if offset >= len(pg) {
		return nil, total
	}
	var ids []string
	for _, s := range pg[offset:] {
		ids = append(ids, s.ID())
	}
	return ids, total
}

// sumHeap is a max-heap of hosts by less.
type sumHeap struct {
	s    []*hostview.Host
	less func(a, b *hostview.Host) int
}

func (h *sumHeap) Len() int           { return len(h.s) }
func (h *sumHeap) Less(i, j int) bool { return h.less(h.s[i], h.s[j]) > 0 }
func (h *sumHeap) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *sumHeap) Push(x any)         { h.s = append(h.s, x.(*hostview.Host)) }
func (h *sumHeap) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}
