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
	"unique"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/feedcache"
	"github.com/eimhq/eim/inventory"
)

// fleet is the UI's summary of every host in memory, kept by the change
// feed (a cache: package feed): what the overview counts and what the
// host list's built-in views (tabs, states, the search box) select and
// sort, so that they cost a pass over memory rather than scans of the
// hosts and instances tables (at 100,000 hosts, a state's COUNT over a
// substring filter or an instance subquery reads every row). The rows of
// a page are still read from the store, by their IDs, and a filter typed
// by the user always runs in the store. While the feed is not live (at
// start, while the database is away) the pages ask the store for
// everything.
type fleet struct {
	store  eim.Store
	runner *feed.Runner
	loaded atomic.Bool
	once   atomic.Bool // loaded at least once

	mu    sync.RWMutex
	hosts map[string]*hostSum // by host ID
	prj   map[string]*prjSum  // by project
	inst  map[string]string   // instance ID → its host's ID
}

// prjSum is a project's hosts and their counts, kept as hosts come and go
// so that the overview reads them rather than counting.
type prjSum struct {
	hosts  map[string]*hostSum
	byName []*hostSum // ordered by name, then ID: the list's default order
	states [len(stateKeys)]int
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
	sorted map[string][]*hostSum
	// text is the hosts' searched fields in one buffer, for the search
	// box: built on the first search, dropped when a host comes, goes or
	// changes a searched field.
	text *searchText
}

// searchText is every host's searched fields (hostSum.search), each
// followed by \x01, in one buffer, in the order of byName: a search is a
// scan of contiguous memory, and a match's text is its host's place in
// byName. A host's change that keeps its place (a status) keeps the text;
// one that moves it, or changes what is searched, drops it.
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
func (p *prjSum) search(q string, match func(*hostSum) bool) ([]*hostSum, bool) {
	t := p.text
	if t == nil || len(t.ids) != len(p.byName) {
		return nil, false
	}
	if strings.ContainsAny(q, "\x00\x01") {
		return nil, true // no host's text holds these
	}
	needle := []byte(q)
	var out []*hostSum
	for pos := 0; pos < len(t.buf); {
		i := bytes.Index(t.buf[pos:], needle)
		if i < 0 {
			break
		}
		j, _ := slices.BinarySearch(t.ends, pos+i) // the text holding the match
		s := p.byName[j]
		if s.id != t.ids[j] {
			return nil, false
		}
		if match(s) {
			out = append(out, s)
		}
		pos = t.ends[j] + 1
	}
	return out, true
}

// hostSum is what the fleet keeps of a host and its instance. It is not
// changed once in the maps: a change replaces it (readers hold the lock
// only while they look).
type hostSum struct {
	project, id, name, serial, uuid, hostname string
	siteID                                    string
	search                                    string // the searched fields, lower-case, joined
	hostStatus                                string
	hostInd, onbInd, regInd                   eim.StatusIndication
	desired, current                          eim.HostState
	statusTime                                uint64
	inst                                      string
	provInd, updInd                           eim.StatusIndication
	osID                                      string
	osUpdate                                  bool   // an OS update is available
	bits                                      uint16 // the states it is in: bit i for stateKeys[i]
	tabs                                      uint8  // the tabs it is on: bit i for tabKeys[i]
}

// fleetBatch is how many hosts (or instances) a load reads per query.
const fleetBatch = 2000

func newFleet(st eim.Store) *fleet {
	f := &fleet{store: st}
	f.reset()
	f.runner = feed.New(feed.Options{
		Store: st, Name: "ui-fleet", Kinds: []eim.Kind{eim.KindHost, eim.KindInstance},
		Handle: f.handle, Relist: f.relist, Reset: f.reset,
	})
	return f
}

// Run follows the feed until ctx ends.
func (f *fleet) Run(ctx context.Context) error { return f.runner.Run(ctx) }

// live reports whether the summary may be used.
func (f *fleet) live() bool { return f != nil && f.loaded.Load() && f.runner.Live() }

func (f *fleet) reset() {
	f.loaded.Store(false)
	f.mu.Lock()
	f.hosts, f.prj, f.inst = map[string]*hostSum{}, map[string]*prjSum{}, map[string]string{}
	f.mu.Unlock()
}

// put replaces old (nil: none) by s (nil: none) in the maps and the
// counts; f.mu is held. Unless ordered, byName is left for the caller to
// sort.
func (f *fleet) put(old, s *hostSum, ordered bool) {
	if s != nil {
		s.classify()
	}
	if old == nil || s == nil || old.search != s.search {
		for _, x := range []*hostSum{old, s} {
			if x != nil && f.prj[x.project] != nil {
				f.prj[x.project].text = nil
			}
		}
	}
	if old != nil {
		p := f.prj[old.project]
		p.count(old, -1)
		delete(p.hosts, old.id)
		delete(f.hosts, old.id)
		if ordered {
			i, found := slices.BinarySearchFunc(p.byName, old, byName)
			switch {
			case !found:
			case s != nil && s.name == old.name:
				p.byName[i] = s // in its place
			default:
				p.byName = slices.Delete(p.byName, i, i+1)
			}
			for col, idx := range p.sorted {
				less := ascending[col]
				i, found := slices.BinarySearchFunc(idx, old, less)
				switch {
				case !found:
				case s != nil && s.project == old.project && less(s, old) == 0 && sameKey(col, s, old):
					idx[i] = s // in its place
					continue
				default:
					idx = slices.Delete(idx, i, i+1)
				}
				p.sorted[col] = idx
			}
		} else {
			p.sorted = nil
		}
	}
	if s == nil {
		return
	}
	p := f.prj[s.project]
	if p == nil {
		p = &prjSum{hosts: map[string]*hostSum{}, updOS: map[string]*inventory.UpdateCounts{}, sites: map[string]*[len(stateKeys) + 1]int{}}
		f.prj[s.project] = p
	}
	p.hosts[s.id] = s
	f.hosts[s.id] = s
	p.count(s, 1)
	switch {
	case !ordered:
		p.byName = append(p.byName, s)
		p.sorted = nil
	case old == nil || s.name != old.name:
		i, _ := slices.BinarySearchFunc(p.byName, s, byName)
		p.byName = slices.Insert(p.byName, i, s)
	}
	if !ordered {
		return
	}
	for col, idx := range p.sorted {
		if old != nil && old.project == s.project && sameKey(col, s, old) {
			continue // replaced in its place above
		}
		i, _ := slices.BinarySearchFunc(idx, s, ascending[col])
		p.sorted[col] = slices.Insert(idx, i, s)
	}
}

// sameKey reports whether a and b have the same value of column col.
func sameKey(col string, a, b *hostSum) bool {
	return a.id == b.id && ascending[col](a, b) == 0
}

func byName(a, b *hostSum) int {
	return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.id, b.id))
}

// count adds (d = 1) or takes away (d = -1) a host's share of the counts.
func (p *prjSum) count(s *hostSum, d int) {
	for i := range stateKeys {
		if s.bits&(1<<i) != 0 {
			p.states[i] += d
		}
	}
	sc := p.sites[s.siteID]
	if sc == nil {
		sc = new([len(stateKeys) + 1]int)
		p.sites[s.siteID] = sc
	}
	sc[0] += d
	for i := range stateKeys {
		if s.bits&(1<<i) != 0 {
			sc[i+1] += d
		}
	}
	if sc[0] == 0 {
		delete(p.sites, s.siteID)
	}
	for t := range tabKeys {
		if s.tabs&(1<<t) == 0 {
			continue
		}
		p.views[t][0] += d
		for i := range stateKeys {
			if s.bits&(1<<i) != 0 {
				p.views[t][i+1] += d
			}
		}
	}
	if s.inst == "" {
		return
	}
	c := p.updOS[s.osID]
	if c == nil {
		c = &inventory.UpdateCounts{}
		p.updOS[s.osID] = c
	}
	for _, c := range []*inventory.UpdateCounts{&p.upd, c} {
		c.Total += d
		switch s.updInd {
		case eim.StatusIdle:
			c.UpToDate += d
		case eim.StatusInProgress:
			c.Updating += d
		case eim.StatusError:
			c.Failed += d
		default:
			c.Unknown += d
		}
		if s.osUpdate {
			c.OSUpdateAvailable += d
		}
	}
	if c.Total == 0 {
		delete(p.updOS, s.osID)
	}
}

// relist reads every host and instance afresh.
func (f *fleet) relist(ctx context.Context) error {
	hosts := map[string]*hostSum{}
	err := feedcache.Each(ctx, f.store, "", eim.KindHost, fleetBatch, func(r eim.Resource) {
		s := sumOf(r.(*eim.Host))
		hosts[s.id] = s
	})
	if err != nil {
		return err
	}
	inst := map[string]string{}
	err = feedcache.Each(ctx, f.store, "", eim.KindInstance, fleetBatch, func(r eim.Resource) {
		in := r.(*eim.Instance)
		if s := hosts[in.HostID]; s != nil {
			s.setInstance(in)
			inst[in.ResourceID] = in.HostID
		}
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.hosts, f.prj, f.inst = map[string]*hostSum{}, map[string]*prjSum{}, inst
	for _, s := range hosts {
		f.put(nil, s, false)
	}
	for _, p := range f.prj {
		slices.SortFunc(p.byName, byName)
	}
	f.mu.Unlock()
	f.loaded.Store(true)
	f.once.Store(true)
	return nil
}

// handle reads again the hosts and instances that changed.
func (f *fleet) handle(ctx context.Context, evs []eim.Event) error {
	var hostIDs, instIDs []string
	for _, ev := range evs {
		switch ev.Kind {
		case eim.KindHost:
			hostIDs = append(hostIDs, ev.ID)
		case eim.KindInstance:
			instIDs = append(instIDs, ev.ID)
		}
	}
	hostIDs, instIDs = slices.Compact(slices.Sorted(slices.Values(hostIDs))), slices.Compact(slices.Sorted(slices.Values(instIDs)))
	var hosts, insts []eim.Resource
	err := f.store.View(ctx, "", func(tx eim.Tx) error {
		var err error
		if len(hostIDs) > 0 {
			if hosts, err = tx.GetMany(ctx, eim.KindHost, hostIDs); err != nil {
				return err
			}
		}
		if len(instIDs) > 0 {
			insts, err = tx.GetMany(ctx, eim.KindInstance, instIDs)
		}
		return err
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	found := map[string]bool{}
	for _, r := range hosts {
		h := r.(*eim.Host)
		found[h.ResourceID] = true
		s := sumOf(h)
		old := f.hosts[h.ResourceID]
		if old != nil {
			s.inst, s.provInd, s.updInd, s.osID, s.osUpdate = old.inst, old.provInd, old.updInd, old.osID, old.osUpdate
		}
		f.put(old, s, true)
	}
	for _, id := range hostIDs {
		if old := f.hosts[id]; old != nil && !found[id] {
			f.put(old, nil, true)
		}
	}
	found = map[string]bool{}
	for _, r := range insts {
		in := r.(*eim.Instance)
		found[in.ResourceID] = true
		if old := f.hosts[in.HostID]; old != nil {
			s := *old
			s.setInstance(in)
			f.put(old, &s, true)
			f.inst[in.ResourceID] = in.HostID
		}
	}
	for _, id := range instIDs {
		if found[id] {
			continue
		}
		if old := f.hosts[f.inst[id]]; old != nil && old.inst == id {
			s := *old
			s.clearInstance()
			f.put(old, &s, true)
		}
		delete(f.inst, id)
	}
	return nil
}

func sumOf(h *eim.Host) *hostSum {
	s := &hostSum{project: intern(h.Project), id: h.ResourceID, siteID: intern(h.SiteID), name: h.Name, serial: h.SerialNumber, uuid: h.UUID, hostname: h.Hostname,
		hostStatus: intern(h.HostStatus), hostInd: intern(h.HostStatusIndicator), onbInd: intern(h.OnboardingStatusIndicator),
		regInd: intern(h.RegistrationStatusIndicator), desired: intern(h.DesiredState), current: intern(h.CurrentState),
		statusTime: h.HostStatusTimestamp}
	s.search = strings.ToLower(strings.Join([]string{s.name, s.serial, s.uuid, s.id, s.hostname}, "\x00"))
	return s
}

// intern returns the one copy of a value that many hosts share (states,
// indicators, common statuses, project names): each read of a row
// allocates its strings anew, which for 100,000 hosts is tens of MB.
func intern[S ~string](v S) S { return S(unique.Make(string(v)).Value()) }

func (s *hostSum) setInstance(in *eim.Instance) {
	s.inst, s.provInd, s.updInd = in.ResourceID, intern(in.ProvisioningStatusIndicator), intern(in.UpdateStatusIndicator)
	s.osID, s.osUpdate = intern(in.OSID), in.OsUpdateAvailable != ""
}

func (s *hostSum) clearInstance() {
	s.inst, s.provInd, s.updInd, s.osID, s.osUpdate = "", "", "", "", false
}

// classify sets the host's state and tab bits.
func (s *hostSum) classify() {
	s.bits, s.tabs = 0, 0
	for i, k := range stateKeys {
		if statePreds[k](s) {
			s.bits |= 1 << i
		}
	}
	for i, k := range tabKeys {
		if tabPreds[k](s) {
			s.tabs |= 1 << i
		}
	}
}

// tabKeys are the keys of tabPreds, in the order of their bits.
var tabKeys = [...]string{"all", "provisioned", "onboarded", "registered"}

// stateKeys are the keys of statePreds, in the order of their bits.
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

// The built-in views as predicates over a summary: the same selections
// as the filters of hostStates and hostTabs, which the pages use while
// the fleet is not live.
var statePreds = map[string]func(*hostSum) bool{
	"running":      func(s *hostSum) bool { return s.hostStatus == "Running" && s.hostInd == eim.StatusIdle },
	"provisioning": func(s *hostSum) bool { return s.inst != "" && s.provInd == eim.StatusInProgress },
	"onboarding": func(s *hostSum) bool {
		return s.desired == eim.HostStateOnboarded && s.current != eim.HostStateOnboarded
	},
	"failed": func(s *hostSum) bool {
		return (s.inst != "" && (s.provInd == eim.StatusError || s.updInd == eim.StatusError)) ||
			s.onbInd == eim.StatusError || s.regInd == eim.StatusError ||
			(s.hostInd == eim.StatusError && s.hostStatus != "No Connection")
	},
	"noconnection": func(s *hostSum) bool { return s.hostStatus == "No Connection" },
	"updating":     func(s *hostSum) bool { return s.inst != "" && s.updInd == eim.StatusInProgress },
}

var tabPreds = map[string]func(*hostSum) bool{
	"all":         func(*hostSum) bool { return true },
	"provisioned": func(s *hostSum) bool { return s.inst != "" },
	"onboarded":   func(s *hostSum) bool { return s.current == eim.HostStateOnboarded && s.inst == "" },
	"registered":  func(s *hostSum) bool { return s.current != eim.HostStateOnboarded },
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
	return len(p.hosts), out
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

// sortKey orders summaries as the store orders hosts by a column of
// hostColumns, ascending or descending, then by ID.
func sortKey(col string, desc bool) func(a, b *hostSum) int {
	var by func(a, b *hostSum) int
	switch col {
	case "id":
		by = func(a, b *hostSum) int { return 0 }
	case "serial":
		by = func(a, b *hostSum) int { return strings.Compare(a.serial, b.serial) }
	case "uuid":
		by = func(a, b *hostSum) int { return strings.Compare(a.uuid, b.uuid) }
	case "status":
		by = func(a, b *hostSum) int { return strings.Compare(a.hostStatus, b.hostStatus) }
	case "lastseen":
		by = func(a, b *hostSum) int { return cmp.Compare(a.statusTime, b.statusTime) }
	default:
		by = func(a, b *hostSum) int { return strings.Compare(a.name, b.name) }
	}
	if desc {
		return func(a, b *hostSum) int { return cmp.Or(by(b, a), strings.Compare(a.id, b.id)) }
	}
	return func(a, b *hostSum) int { return cmp.Or(by(a, b), strings.Compare(a.id, b.id)) }
}

// hostView is a built-in view of the host list: a tab, a state ("" = any),
// a search ("" = none) and an order (a column of hostColumns, "" = name).
type hostView struct {
	tab, state, q, sort string
	desc                bool
}

// ascending are the orders of the sortable columns besides the name (whose
// order is byName), ascending: the orders of prjSum.sorted.
var ascending = map[string]func(a, b *hostSum) int{
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
	if p = f.prj[project]; p == nil || p.sorted[col] != nil {
		return
	}
	if p.sorted == nil {
		p.sorted = map[string][]*hostSum{}
	}
	p.sorted[col] = slices.SortedFunc(maps.Values(p.hosts), less)
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
	if p = f.prj[project]; p == nil || p.text != nil {
		return
	}
	t := &searchText{ends: make([]int, 0, len(p.byName)), ids: make([]string, 0, len(p.byName))}
	size := 0
	for _, s := range p.byName {
		size += len(s.search) + 1
	}
	t.buf = make([]byte, 0, size)
	for _, s := range p.byName {
		t.buf = append(t.buf, s.search...)
		t.ends = append(t.ends, len(t.buf))
		t.buf = append(t.buf, 1)
		t.ids = append(t.ids, s.id)
	}
	p.text = t
}

// page returns the IDs of the project's hosts in view v, from offset, at
// most limit; and how many are in it: a walk of the hosts in the view's
// order from either end. Without a search the view's count is kept, and
// the walk ends when the page is full; a search walks every host,
// counting the matches.
func (f *fleet) page(project string, v hostView, offset, limit int) ([]string, int) {
	bit, tabBit := stateBit(v.state), uint8(0)
	si, ti := 0, slices.Index(tabKeys[:], cmp.Or(v.tab, "all"))
	if ti < 0 {
		return nil, 0
	}
	tabBit = 1 << ti
	if bit != 0 {
		si = slices.Index(stateKeys[:], v.state) + 1
	}
	q := strings.ToLower(v.q)
	match := func(s *hostSum) bool {
		return s.tabs&tabBit != 0 && (bit == 0 || s.bits&bit != 0) && (q == "" || strings.Contains(s.search, q))
	}
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
		if found, ok := p.search(q, match); ok && (v.sort == "" || v.sort == "name" || len(found) <= maxSortedHits) {
			// The hosts that hold the text, in the view's order.
			if v.sort != "" && v.sort != "name" {
				slices.SortFunc(found, ascending[v.sort])
			}
			if v.desc {
				slices.Reverse(found)
			}
			var ids []string
			for _, s := range found[min(offset, len(found)):min(offset+limit, len(found))] {
				ids = append(ids, s.id)
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
		s := order[i]
		if v.desc {
			s = order[n-1-i]
		}
		if !match(s) {
			continue
		}
		if seen++; seen > offset && len(ids) < limit {
			ids = append(ids, s.id)
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
func heapPage(p *prjSum, col string, desc bool, match func(*hostSum) bool, offset, limit int) ([]string, int) {
	less := sortKey(col, desc)
	k := offset + limit
	h := &sumHeap{less: less}
	total := 0
	for _, s := range p.hosts {
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
		ids = append(ids, s.id)
	}
	return ids, total
}

// sumHeap is a max-heap of summaries by less.
type sumHeap struct {
	s    []*hostSum
	less func(a, b *hostSum) int
}

func (h *sumHeap) Len() int           { return len(h.s) }
func (h *sumHeap) Less(i, j int) bool { return h.less(h.s[i], h.s[j]) > 0 }
func (h *sumHeap) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *sumHeap) Push(x any)         { h.s = append(h.s, x.(*hostSum)) }
func (h *sumHeap) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}
