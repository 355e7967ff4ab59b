package guard

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultLimit is the recompile limit of a Cache made with limit 0, as
// torch._dynamo.config.cache_size_limit.
const DefaultLimit = 8

// item is one cache entry with its compiled value.
type item struct {
	e     *Entry
	value any
}

// Cache holds the entries of one compiled function, in insertion order.
// It is safe for concurrent use: Lookup reads an immutable snapshot through
// an atomic pointer without locking; Insert copies the slice (copy on
// write) under a mutex that only writers take.
type Cache struct {
	policy Policy
	limit  int
	items  atomic.Pointer[[]item]
	mu     sync.Mutex // serialises Insert
}

// NewCache returns an empty cache whose entries are planned under policy.
// limit is the recompile limit: the number of entries after which Plan
// reports LimitReached (DefaultLimit when limit <= 0).
func NewCache(policy Policy, limit int) *Cache {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Cache{policy: policy, limit: limit}
}

func (c *Cache) load() []item {
	if p := c.items.Load(); p != nil {
		return *p
	}
	return nil
}

// Lookup returns the first entry whose guards pass for call, with the value
// it was inserted with. It takes no lock and does not allocate.
func (c *Cache) Lookup(call *Call) (entry *Entry, value any, ok bool) {
	items := c.load()
	for i := range items {
		if items[i].e.Check(call) {
			return items[i].e, items[i].value, true
		}
	}
	return nil, nil, false
}

// Reason says why a call recompiles, for logs (GOCOMPILE_LOGS=recompiles).
type Reason struct {
	// Text names, for each existing entry, the first guard that failed, and
	// the dims that automatic dynamic shapes made dynamic.
	Text string
	// LimitReached is set when the cache already holds its limit of
	// entries: Plan then returns no entry and the caller runs the function
	// eagerly (warning once). Text still says why no entry fits the call.
	LimitReached bool
	// DynamicDims lists the (tensor input, dim) pairs that are dynamic in
	// the planned entry.
	DynamicDims [][2]int
}

// Plan returns the entry to trace and compile for call after Lookup missed,
// and the reason for the (re)compile.
//
// Under automatic dynamic shapes (Policy.AutoDynamic), every existing entry
// that differs from call only in the sizes of dims (same numbers of inputs,
// dtypes, devices, ranks, contiguity and scalar values) contributes the
// dims whose sizes differ and the dims that are dynamic in it: those dims
// are dynamic in the planned entry, along with those the Policy makes
// dynamic. Dims of size 0 or 1 in call stay static, and so do dims the
// tracer specialised (Entry.Specialize) in a contributing entry, since the
// trace would specialise them again.
//
// When the cache holds its limit of entries, Plan returns a nil entry and a
// Reason with LimitReached set. Plan does not change the cache: the caller
// traces the entry (adding guards with AddEquality and Specialize) and
// then calls Insert. Callers that compile concurrently should serialise
// Plan..Insert for one function and Lookup again first.
func (c *Cache) Plan(call *Call) (*Entry, Reason) {
	items := c.load()
	var whys []string
	for i := range items {
		if w := items[i].e.Why(call); w != "" {
			whys = append(whys, fmt.Sprintf("entry %d: %s", i, w))
		} else {
			whys = append(whys, fmt.Sprintf("entry %d: guards pass", i))
		}
	}
	why := strings.Join(whys, "; ")
	if len(items) >= c.limit {
		// LimitReached says what happens; the callers' message says so.
		return nil, Reason{Text: why, LimitReached: true}
	}
	if len(items) == 0 {
		e := newEntry(call, c.policy, nil, nil)
		return e, Reason{Text: "first call", DynamicDims: e.DynamicDims()}
	}
	var extra, keep, was map[[2]int]bool
	if c.policy.AutoDynamic {
		extra, keep, was = map[[2]int]bool{}, map[[2]int]bool{}, map[[2]int]bool{}
		for i := range items {
			e := items[i].e
			if !e.sameKind(call) {
				continue
			}
			for t := range e.tensors {
				m := &call.Tensors[t]
				for d, ds := range e.tensors[t].dims {
					k := [2]int{t, d}
					switch {
					case ds.specialized:
						keep[k] = true
					case ds.sym >= 0:
						extra[k], was[k] = true, true
					case m.Dim(d) != ds.size:
						extra[k] = true
					}
				}
			}
		}
	}
	e := newEntry(call, c.policy, extra, keep)
	r := Reason{Text: why, DynamicDims: e.DynamicDims()}
	var fresh [][2]int
	for _, k := range r.DynamicDims {
		if extra[k] && !was[k] {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) > 0 {
		r.Text += "; automatic dynamic: " + formatDims(fresh)
	}
	return e, r
}

// Insert appends e, compiled to value, to the cache. It copies the entry
// list, so concurrent Lookups keep reading their snapshot. e must not be
// changed afterwards.
func (c *Cache) Insert(e *Entry, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	items := make([]item, len(old), len(old)+1)
	copy(items, old)
	items = append(items, item{e, value})
	c.items.Store(&items)
}

// Replace puts e, compiled to value, in the place of old (an entry whose
// compiled value went stale), or appends it when old is not in the
// cache. Like Insert, it copies the entry list.
func (c *Cache) Replace(old, e *Entry, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	items := append([]item(nil), c.load()...)
	for i := range items {
		if items[i].e == old {
			items[i] = item{e, value}
			c.items.Store(&items)
			return
		}
	}
	items = append(items, item{e, value})
	c.items.Store(&items)
}

// Len is the number of entries.
func (c *Cache) Len() int { return len(c.load()) }

// Recompiles is the number of entries compiled after the first one.
func (c *Cache) Recompiles() int { return max(c.Len()-1, 0) }

// Limit is the recompile limit: the most entries Plan plans.
func (c *Cache) Limit() int { return c.limit }

// Entries returns the entries in lookup order (a new slice).
func (c *Cache) Entries() []*Entry {
	items := c.load()
	out := make([]*Entry, len(items))
	for i := range items {
		out[i] = items[i].e
	}
	return out
}
