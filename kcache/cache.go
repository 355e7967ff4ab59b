package kcache

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
)

// Default limits of a cache.
const (
	DefaultMemoryLimit = 256 << 20 // bytes of entries kept in memory
	DefaultDiskLimit   = 1 << 30   // bytes of entry files kept on disk
)

// touchInterval is how often a memory hit marks the entry's file used, so
// that the disk LRU sees entries a long-lived process keeps using without
// a syscall on every hit.
const touchInterval = time.Hour

// A Cache holds compiled artifacts in memory and in a directory shared by
// processes. It is safe for concurrent use; a process normally needs one,
// Default.
type Cache struct {
	mem   *memory
	disk  *disk // nil: memory only
	log   *logger
	group singleflight.Group

	writable atomic.Bool // disk writes are on: the directory took a probe file, and no write failed yet

	memHits, diskHits, misses, dedup atomic.Int64
	errs, corrupt, writes            atomic.Int64
	savedNanos                       atomic.Int64
}

// Get returns the entry stored under k, from memory or else from disk.
func (c *Cache) Get(k Key) (Entry, bool) {
	if e, ok := c.getMemory(k); ok {
		return e, true
	}
	if e, ok := c.getDisk(k); ok {
		return e, true
	}
	c.misses.Add(1)
	return Entry{}, false
}

// GetOrCompute returns the entry stored under k, from memory, or else from
// disk, or else from compute, whose result it stores in both. Concurrent
// calls for one missing key run compute once and share its result: a
// kernel that many goroutines need at once is compiled once. An error from
// compute is returned and not cached, so a later call tries again.
//
// When the entry compute returns has no CompileSeconds, GetOrCompute
// records how long compute took. When compute panics, GetOrCompute and the
// calls waiting on it panic with the same value.
func (c *Cache) GetOrCompute(k Key, compute func() (Entry, error)) (Entry, error) {
	if compute == nil {
		return Entry{}, errors.New("kcache: GetOrCompute with a nil compute func")
	}
	if e, ok := c.getMemory(k); ok {
		return e, nil
	}
	ran := false
	v, err, _ := c.group.Do(string(k[:]), func() (any, error) {
		ran = true
		// A call for k may have stored it between getMemory and Do.
		if e, ok := c.getMemory(k); ok {
			return e, nil
		}
		if e, ok := c.getDisk(k); ok {
			return e, nil
		}
		c.misses.Add(1)
		start := time.Now()
		e, err := c.compute(compute)
		if err != nil {
			c.errs.Add(1)
			c.log.event("kcache: compute failed", "key", k.short(), "err", err)
			return Entry{}, err
		}
		if e.CompileSeconds == 0 {
			e.CompileSeconds = time.Since(start).Seconds()
		}
		c.log.event("kcache: miss", "key", k.short(), "kind", e.Kind(), "compile_s", e.CompileSeconds)
		if err := c.put(k, e); err != nil {
			c.errs.Add(1)
			return Entry{}, err
		}
		return e, nil
	})
	if !ran {
		c.dedup.Add(1)
	}
	if p, ok := err.(*computePanic); ok {
		panic(p.value)
	}
	if err != nil {
		return Entry{}, err
	}
	return v.(Entry), nil
}

// computePanic carries a panic in compute out of singleflight, which
// would otherwise wrap the value, to every caller waiting on it, so that
// callers that recover a panic of their own type still see it.
type computePanic struct{ value any }

func (p *computePanic) Error() string { return fmt.Sprintf("kcache: compute panicked: %v", p.value) }

func (c *Cache) compute(compute func() (Entry, error)) (e Entry, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &computePanic{r}
		}
	}()
	return compute()
}

// Put stores e under k in memory and on disk. It fails only when e is
// invalid (neither or both of Kernel and Program set, an empty program
// kind, a kernel with no code); a disk that cannot be written is logged
// once and the cache goes on in memory.
func (c *Cache) Put(k Key, e Entry) error { return c.put(k, e) }

func (c *Cache) put(k Key, e Entry) error {
	if err := e.validate(); err != nil {
		return fmt.Errorf("kcache: invalid entry for %s: %w", k.short(), err)
	}
	e.clipLabels() // as the disk keeps them
	now := time.Now()
	c.mem.add(k, e, now)
	if c.disk == nil || !c.writable.Load() {
		return nil
	}
	data, err := EncodeEntry(k, &e)
	if err != nil {
		return err
	}
	if c.disk.limit > 0 && int64(len(data)) > c.disk.limit {
		c.log.event("kcache: entry larger than the disk limit; kept in memory only", "key", k.short(), "bytes", len(data))
		return nil
	}
	if err := c.disk.write(k, data); err != nil {
		if c.writable.Swap(false) {
			c.log.warnOnce("unwritable", "kcache: cannot write to the cache directory; new compiled artifacts are kept in memory only", "dir", c.disk.dir, "err", err)
		}
		return nil
	}
	c.writes.Add(1)
	c.log.event("kcache: write", "key", k.short(), "kind", e.Kind(), "bytes", len(data))
	if n, freed, err := c.disk.maybePrune(now); n > 0 || err != nil {
		c.log.event("kcache: evict", "entries", n, "bytes", freed, "err", err)
	}
	return nil
}

func (c *Cache) getMemory(k Key) (Entry, bool) {
	now := time.Now()
	e, ok, touch := c.mem.get(k, now, now.Add(-touchInterval))
	if !ok {
		return Entry{}, false
	}
	if touch && c.disk != nil {
		c.disk.touch(k, now)
	}
	c.hit(&c.memHits, e)
	if c.log.on { // build no arguments on the hot path
		c.log.event("kcache: hit", "where", "memory", "key", k.short(), "kind", e.Kind(), "saved_s", e.CompileSeconds)
	}
	return e, true
}

func (c *Cache) getDisk(k Key) (Entry, bool) {
	if c.disk == nil {
		return Entry{}, false
	}
	data, err := c.disk.read(k)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// No file, or no shard directory where one belongs.
		return Entry{}, false
	}
	var e *Entry
	if err == nil {
		var got Key
		got, e, err = DecodeEntry(data)
		if err == nil && got != k {
			err = fmt.Errorf("%w: file holds the entry of key %s", ErrCorrupt, got)
		}
	}
	if err != nil {
		c.corrupt.Add(1)
		c.badEntry(k, err)
		return Entry{}, false
	}
	now := time.Now()
	c.disk.touch(k, now)
	c.mem.add(k, *e, now)
	c.hit(&c.diskHits, *e)
	c.log.event("kcache: hit", "where", "disk", "key", k.short(), "kind", e.Kind(), "saved_s", e.CompileSeconds)
	return *e, true
}

// badEntry logs an entry file that cannot be used; the caller treats it
// as a miss and rewrites it. An entry of another format version is
// expected after an upgrade, so it is an event, not a warning.
func (c *Cache) badEntry(k Key, err error) {
	args := []any{"key", k.short(), "file", c.disk.path(k), "err", err}
	const msg = "kcache: unusable cache entry; rebuilding it"
	switch {
	case errors.Is(err, ErrVersion):
		c.log.event(msg, args...)
	case errors.Is(err, ErrTruncated):
		c.log.warnOnce("truncated", msg, args...)
	case errors.Is(err, ErrChecksum):
		c.log.warnOnce("checksum", msg, args...)
	case errors.Is(err, ErrCorrupt):
		c.log.warnOnce("corrupt", msg, args...)
	default:
		c.log.warnOnce("unreadable", msg, args...)
	}
}

func (c *Cache) hit(counter *atomic.Int64, e Entry) {
	counter.Add(1)
	c.savedNanos.Add(int64(e.CompileSeconds * 1e9))
}

// Entries lists the entries on disk, most recently used first. It reads
// only each file's header: an entry listed without Err may still fail its
// checksum when read.
func (c *Cache) Entries() ([]EntryInfo, error) {
	if c.disk == nil {
		return nil, nil
	}
	return c.disk.list(time.Now())
}

// Prune removes least recently used entries from disk until their files
// total at most maxBytes, and returns how many it removed and their size.
func (c *Cache) Prune(maxBytes int64) (removed int, freed int64, err error) {
	if c.disk == nil {
		return 0, 0, nil
	}
	return c.disk.prune(max(maxBytes, 0), time.Now())
}

// Clear removes every entry from memory and from disk.
func (c *Cache) Clear() error {
	c.mem.clear()
	if c.disk == nil {
		return nil
	}
	return c.disk.clear()
}
