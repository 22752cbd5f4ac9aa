package hostview

// Project registers fn as a projection over the view: it is told of
// every record the view replaces, old (nil: the host was not held) by
// new (nil: the host is gone), in order per host. It is called with the
// host's lock held, from whichever goroutine replaced the record (the
// feed's, a call's), so it must be quick, must not call the view, and
// keeps the records themselves rather than copies of them (they never
// change). Call it before Run: the read ahead then reads the instances
// too, and tells fn of every host.
func (v *View) Project(fn func(old, new *Host)) {
	for i := range v.shards {
		v.shards[i].mu.Lock()
	}
	defer func() {
		for i := range v.shards {
			v.shards[i].mu.Unlock()
		}
	}()
	var projs []func(old, new *Host)
	if p := v.projs.Load(); p != nil {
		projs = append(projs, *p...)
	}
	projs = append(projs, fn)
	v.projs.Store(&projs)
	// What the view holds already (registered late: tests).
	for i := range v.shards {
		for _, e := range v.shards[i].m {
			if e.h != nil {
				fn(nil, e.h)
			}
		}
	}
}

// Primed reports whether the view's read ahead has read the whole fleet
// once (with projections, the instances too): until then a projection
// knows only part of it.
func (v *View) Primed() bool { return v.primed.Load() }

// WhenPrimed returns a channel closed once the view has read the whole
// fleet (Primed).
func (v *View) WhenPrimed() <-chan struct{} { return v.primedC }

// projected reports whether the view has projections.
func (v *View) projected() bool { return v.projs.Load() != nil }

// project tells the projections that old was replaced by new.
func (v *View) project(old, new *Host) {
	p := v.projs.Load()
	if p == nil || old == new {
		return
	}
	for _, fn := range *p {
		fn(old, new)
	}
}
