package exporter

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/eimhq/eim/hostview"
)

// The per-host series of a gzip answer (what Prometheus asks for) are
// kept compressed between scrapes. The hosts are divided into buckets by
// their ID's slot (about 64 hosts a bucket; a power of two of them, at
// most nSlots), and each bucket keeps each per-host family's lines
// compressed on their own (a segment, gzip.go). A scrape writes the
// family's header and then every bucket's segment of it, and compresses
// again only the buckets whose slots changed since (a host, or its
// instance, changed, came or went) and, for edge_host_schedule, those
// where a maintenance window opened or closed over a host. At 100,000
// hosts a scrape with nothing changed writes 23 MB it compressed before,
// instead of compressing 640 MB of text (BENCHMARKS.md).
//
// A change to the projects (a project's UUID, its per-host setting, one
// created or deleted) or to the number of buckets starts afresh. After a
// load of the snapshot the feed loop compresses everything at once, so
// that the first scrape does not (feed.go).

// hostCache is the compressed per-host series of one Service.
type hostCache struct {
	mu       sync.Mutex
	n        int                    // buckets
	projects map[string]*projectRec // as last rendered with
	buckets  []bucket
}

// bucket is a bucket's hosts and their compressed series.
type bucket struct {
	ver   uint64     // the newest version of its slots when rendered
	done  bool       // rendered once
	hosts []hostView // the hosts shown, by ID; maintenance as rendered
	ids   []string   // their projects' UUIDs
	segs  [numFamilies]segment
}

// numFamilies is len(hostFamilies).
const numFamilies = 6

// hostsPerBucket is the target size of a bucket: large enough that a
// segment compresses about as well as the whole text, small enough that
// a change recompresses little.
const hostsPerBucket = 64

// familyHeaders are the per-host families' # HELP and # TYPE lines,
// compressed once.
var familyHeaders [numFamilies]segment

// scheduleFamily is the index of edge_host_schedule in hostFamilies.
var scheduleFamily = slices.IndexFunc(hostFamilies, func(f *hostFamily) bool { return f.name == "edge_host_schedule" })

// compressHeaders fills familyHeaders (at init, once the headers are
// rendered).
func compressHeaders() {
	if len(hostFamilies) != numFamilies || scheduleFamily < 0 {
		panic("exporter: numFamilies or edge_host_schedule out of step with hostFamilies")
	}
	c := newCompressor()
	for i, f := range hostFamilies {
		familyHeaders[i] = c.compress(f.header)
	}
}

func newHostCache() *hostCache { return &hostCache{} }

// bucketsFor returns how many buckets hosts are divided into.
func bucketsFor(hosts int) int {
	n := 16
	for n < nSlots && n*hostsPerBucket < hosts {
		n *= 2
	}
	return n
}

// segments brings the cache up to date with v and returns the per-host
// series as segments, in the order they are written (nil when no host
// is shown). The segments' data is never changed afterwards: the answer
// is written without the lock.
func (c *hostCache) segments(v *view) []segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := bucketsFor(len(v.hosts))
	if n != c.n || !sameProjects(c.projects, v.projects) {
		c.n, c.buckets = n, make([]bucket, n)
	}
	c.projects = v.projects
	mask := uint32(n - 1)
	cur := make([]uint64, n)
	for s, ver := range v.slots {
		b := uint32(s) & mask
		cur[b] = max(cur[b], ver)
	}
	dirty := make([]bool, n)
	for b := range c.buckets {
		dirty[b] = !c.buckets[b].done || c.buckets[b].ver != cur[b]
	}
	// One pass over the hosts: those of the buckets to render, and those
	// a window covers in the others.
	fresh := make([][]hostView, n)
	covered := make([][]*hostview.Host, n)
	for i := range v.hosts {
		hv := &v.hosts[i]
		if p := v.projects[hv.h.Project()]; p == nil || p.perHostOff {
			continue
		}
		b := hv.slot & mask
		switch {
		case dirty[b]:
			fresh[b] = append(fresh[b], *hv)
		case hv.maintenance:
			covered[b] = append(covered[b], hv.h)
		}
	}
	var jobs []job
	shown := 0
	for b := range c.buckets {
		bk := &c.buckets[b]
		if dirty[b] {
			slices.SortFunc(fresh[b], func(x, y hostView) int { return cmp.Compare(x.h.ID(), y.h.ID()) })
			bk.hosts, bk.ids = fresh[b], make([]string, len(fresh[b]))
			for i := range bk.hosts {
				bk.ids[i] = v.projects[bk.hosts[i].h.Project()].id
			}
			bk.ver, bk.done = cur[b], true
			jobs = append(jobs, job{bk: bk, all: true})
		} else if bk.cover(covered[b]) {
			jobs = append(jobs, job{bk: bk})
		}
		shown += len(bk.hosts)
	}
	renderAll(jobs)
	if shown == 0 {
		return nil
	}
	out := make([]segment, 0, numFamilies*(n+1))
	for f := range hostFamilies {
		out = append(out, familyHeaders[f])
		for b := range c.buckets {
			if len(c.buckets[b].hosts) > 0 {
				out = append(out, c.buckets[b].segs[f])
			}
		}
	}
	return out
}

// job is a bucket to compress: all its families, or edge_host_schedule.
type job struct {
	bk  *bucket
	all bool
}

// renderAll does the jobs, on as many cores as there are (the buckets
// are apart: a cold scrape takes about half as long on two cores).
func renderAll(jobs []job) {
	workers := min(runtime.GOMAXPROCS(0), (len(jobs)+7)/8)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			c := compressors.Get().(*compressor)
			defer compressors.Put(c)
			var text []byte
			var labels bucketLabels
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				labels.render(j.bk)
				if !j.all {
					text = j.bk.render(c, scheduleFamily, &labels, text)
					continue
				}
				for f := range hostFamilies {
					text = j.bk.render(c, f, &labels, text)
				}
			}
		})
	}
	wg.Wait()
}

// bucketLabels are the identity labels of a bucket's hosts, rendered
// once for the families a job compresses (scratch space, reused): kept
// rendered they would cost as much memory as the compressed series.
type bucketLabels struct {
	buf  []byte
	ends []int
}

func (l *bucketLabels) render(bk *bucket) {
	l.buf, l.ends = l.buf[:0], l.ends[:0]
	for i := range bk.hosts {
		l.buf = appendLabels(l.buf, bk.hosts[i].h, bk.ids[i])
		l.ends = append(l.ends, len(l.buf))
	}
}

// of returns host i's labels.
func (l *bucketLabels) of(i int) []byte {
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.buf[start:l.ends[i]]
}

// render compresses family f's lines of the bucket's hosts into its
// segment; text is scratch space, returned for the next call.
func (bk *bucket) render(c *compressor, f int, labels *bucketLabels, text []byte) []byte {
	text = text[:0]
	fam := hostFamilies[f]
	for i := range bk.hosts {
		text = fam.appendHost(text, &bk.hosts[i], labels.of(i))
	}
	bk.segs[f] = c.compress(text)
	return text
}

// cover sets which of the bucket's hosts a window covers now (those in
// covered, the others not) and reports whether that changed anything.
func (bk *bucket) cover(covered []*hostview.Host) bool {
	now := 0
	for i := range bk.hosts {
		if bk.hosts[i].maintenance {
			now++
		}
	}
	if now == 0 && len(covered) == 0 {
		return false
	}
	next := make([]bool, len(bk.hosts))
	for _, h := range covered {
		if i, ok := slices.BinarySearchFunc(bk.hosts, h.ID(), func(x hostView, id string) int { return cmp.Compare(x.h.ID(), id) }); ok {
			next[i] = true
		}
	}
	changed := false
	for i := range bk.hosts {
		if bk.hosts[i].maintenance != next[i] {
			bk.hosts[i].maintenance = next[i]
			changed = true
		}
	}
	return changed
}

// sameProjects reports whether a and b hold the same projects with the
// same UUIDs and per-host settings.
func sameProjects(a, b map[string]*projectRec) bool {
	if len(a) != len(b) {
		return false
	}
	for name, p := range a {
		q := b[name]
		if q == nil || q.id != p.id || q.perHostOff != p.perHostOff {
			return false
		}
	}
	return true
}
