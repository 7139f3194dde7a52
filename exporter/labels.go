package exporter

import (
	"maps"
	"sync"
	"sync/atomic"
)

// labelIndex maps a name (a tier's, a tenant's) to the entry of its label value: what
// that value's series are reached by, created once. It bounds the label: the overflow
// name and the first limit other names get label values of their own, and any later name
// shares the overflow's entry. "" is no name: it maps to the empty entry, which the index
// never creates.
//
// Lookups of a known name take no lock and allocate nothing: the table is an immutable
// map, replaced under the lock when a name is added. Names past the limit are not
// remembered, so each of their lookups takes the lock; the names a label is fed are few,
// and only a stream of renames gets there.
//
// The zero labelIndex is unusable; call init once, before any lookup.
type labelIndex[E any] struct {
	limit    int
	overflow string
	empty    E
	create   func(label string, n int) E
	table    atomic.Pointer[map[string]E] // immutable; replaced on growth

	mu    sync.Mutex // serialises growth; guards named
	named int        // names in table other than overflow
}

// init sets the index up: at most limit names besides overflow get a label value of
// their own, and "" maps to empty. create makes the entry of a label value, under the
// index's lock, once per value: n is 0 for overflow's, and 1 to limit for the others in
// the order they are first looked up.
func (x *labelIndex[E]) init(limit int, overflow string, empty E, create func(label string, n int) E) {
	x.limit, x.overflow, x.empty, x.create = limit, overflow, empty, create
	x.table.Store(&map[string]E{})
}

// lookup returns the entry of a name: its own, overflow's once the limit is reached, or
// the empty entry for "".
func (x *labelIndex[E]) lookup(name string) E {
	if name == "" {
		return x.empty
	}
	if e, ok := (*x.table.Load())[name]; ok {
		return e
	}
	return x.add(name)
}

// add returns the entry of a name not in the table, creating it if there is room, else
// overflow's, creating that if it is not there yet.
func (x *labelIndex[E]) add(name string) E {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.table.Load()
	if e, ok := old[name]; ok {
		return e
	}
	label, n := x.overflow, 0
	if name != x.overflow && x.named < x.limit {
		x.named++
		label, n = name, x.named
	} else if e, ok := old[label]; ok {
		return e
	}
	e := x.create(label, n)
	next := maps.Clone(old)
	next[label] = e
	x.table.Store(&next)
	return e
}
