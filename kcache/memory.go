package kcache

import (
	"container/list"
	"sync"
	"time"
)

// memory is an LRU map of entries bounded by their total size and count.
// One mutex guards it: operations are a map lookup and a list move, far
// cheaper than the compiles the cache saves.
type memory struct {
	maxBytes   int64 // ≤ 0: unbounded
	maxEntries int   // ≤ 0: unbounded

	mu        sync.Mutex
	ll        *list.List // of *item, most recently used first
	items     map[Key]*list.Element
	bytes     int64
	evictions int64
}

type item struct {
	key  Key
	e    Entry
	size int64

	// touched is when the entry's file was last marked used, so that a
	// long-lived process keeps the disk copies of its hot entries from
	// looking stale to the disk cache's LRU eviction.
	touched time.Time
}

func newMemory(maxBytes int64, maxEntries int) *memory {
	return &memory{maxBytes: maxBytes, maxEntries: maxEntries, ll: list.New(), items: make(map[Key]*list.Element)}
}

// get returns the entry for k and marks it most recently used. When the
// entry's file was last touched before touchBefore, get reports so and
// records the entry as touched now, so that only one caller touches it.
func (m *memory) get(k Key, now, touchBefore time.Time) (e Entry, ok, touch bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[k]
	if !ok {
		return Entry{}, false, false
	}
	m.ll.MoveToFront(el)
	it := el.Value.(*item)
	if it.touched.Before(touchBefore) {
		it.touched, touch = now, true
	}
	return it.e, true, touch
}

// add stores e under k, evicting least recently used entries to stay
// within the limits. An entry larger than the byte limit is not kept.
func (m *memory) add(k Key, e Entry, touched time.Time) {
	size := e.size()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[k]; ok {
		m.remove(el)
	}
	if m.maxBytes > 0 && size > m.maxBytes {
		return
	}
	m.items[k] = m.ll.PushFront(&item{key: k, e: e, size: size, touched: touched})
	m.bytes += size
	for (m.maxBytes > 0 && m.bytes > m.maxBytes) || (m.maxEntries > 0 && m.ll.Len() > m.maxEntries) {
		m.remove(m.ll.Back())
		m.evictions++
	}
}

func (m *memory) remove(el *list.Element) {
	it := m.ll.Remove(el).(*item)
	delete(m.items, it.key)
	m.bytes -= it.size
}

// clear empties m.
func (m *memory) clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ll.Init()
	clear(m.items)
	m.bytes = 0
}

// stats returns the number of entries, their size and the evictions so far.
func (m *memory) stats() (entries int, bytes, evictions int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ll.Len(), m.bytes, m.evictions
}
