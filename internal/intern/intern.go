// Package intern keeps one copy per process of the strings many records
// share — project and site IDs, states, status texts — and names each by
// a two-byte Ref, so that a record of 100,000 hosts holds two bytes
// where a string header takes sixteen.
//
// The table is the process's, as the standard library's unique package
// is: its values are immutable and any part of the process may name
// them. It only grows, up to MaxRefs values; once full, Of reports false
// and the caller keeps the value itself. The values interned are those
// many records share, so a process reaches that bound only if a field
// meant to be shared carries per-record text (an error message naming
// the host), and then keeps working, less compactly.
package intern

import (
	"sync"
	"sync/atomic"
)

// Ref names an interned string; the zero Ref is "".
type Ref uint16

// MaxRefs bounds the table: the values a Ref can name, "" included.
const MaxRefs = 1 << 16

const chunkBits = 8
const chunkSize = 1 << chunkBits

var table struct {
	mu sync.RWMutex
	m  map[string]Ref
	n  int // values held, "" included
	// chunks are read without the lock: a chunk is published once made,
	// and a slot is written before its Ref is returned by Of (under mu,
	// whose release orders it before any reader that got the Ref).
	chunks [MaxRefs / chunkSize]atomic.Pointer[[chunkSize]string]
}

// Of returns the Ref of s, interning it; ok is false when the table is
// full and s was not in it.
func Of(s string) (r Ref, ok bool) {
	if s == "" {
		return 0, true
	}
	table.mu.RLock()
	r, ok = table.m[s]
	table.mu.RUnlock()
	if ok {
		return r, true
	}
	table.mu.Lock()
	defer table.mu.Unlock()
	if r, ok := table.m[s]; ok {
		return r, true
	}
	if table.m == nil {
		table.m = map[string]Ref{}
		table.n = 1 // Ref 0 is ""
	}
	if table.n >= MaxRefs {
		return 0, false
	}
	r = Ref(table.n)
	c := table.chunks[r>>chunkBits].Load()
	if c == nil {
		c = new([chunkSize]string)
		table.chunks[r>>chunkBits].Store(c)
	}
	// A copy of s: the caller's string may be part of a larger one (a
	// row's buffer) that the table must not keep alive.
	s = string([]byte(s))
	c[r&(chunkSize-1)] = s
	table.m[s] = r
	table.n++
	return r, true
}

// Find returns the Ref of s if s is interned, without interning it.
func Find(s string) (Ref, bool) {
	if s == "" {
		return 0, true
	}
	table.mu.RLock()
	defer table.mu.RUnlock()
	r, ok := table.m[s]
	return r, ok
}

// String returns the value r names.
func (r Ref) String() string {
	if r == 0 {
		return ""
	}
	return table.chunks[r>>chunkBits].Load()[r&(chunkSize-1)]
}

// Len returns how many values the table holds, "" included.
func Len() int {
	table.mu.RLock()
	defer table.mu.RUnlock()
	return max(table.n, 1)
}
