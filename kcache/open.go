package kcache

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

type options struct {
	memBytes   int64
	memEntries int
	diskLimit  int64
	noDisk     bool
	logger     *slog.Logger
}

// An Option configures Open.
type Option func(*options)

// WithMemoryLimit bounds the bytes of entries kept in memory (default
// DefaultMemoryLimit; ≤ 0: unbounded).
func WithMemoryLimit(bytes int64) Option { return func(o *options) { o.memBytes = bytes } }

// WithMaxEntries bounds the number of entries kept in memory (default: no
// bound other than the memory limit).
func WithMaxEntries(n int) Option { return func(o *options) { o.memEntries = n } }

// WithDiskLimit bounds the bytes of entry files on disk (default
// DefaultDiskLimit; ≤ 0: unbounded). Several processes sharing a directory
// each enforce their own limit, each counting every process's files.
func WithDiskLimit(bytes int64) Option { return func(o *options) { o.diskLimit = bytes } }

// WithoutDisk keeps entries in memory only.
func WithoutDisk() Option { return func(o *options) { o.noDisk = true } }

// WithLogger sends the cache's logs to l instead of slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// DefaultDir returns the directory Open uses when given none:
// $GOCOMPILE_CACHE_DIR if set, otherwise gocompile in os.UserCacheDir.
func DefaultDir() (string, error) {
	if d := os.Getenv("GOCOMPILE_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "gocompile"), nil
}

// Open returns a cache that keeps its files in dir, or in DefaultDir when
// dir is "". It creates the directory with mode 0700: the cache holds code
// the process will run. Open does not fail: when the directory cannot be
// created, the cache keeps entries in memory only, and when it cannot be
// written, the cache still reads the entries there but adds new ones to
// memory only; either way it logs one warning. Whether the cache logs its
// events (GOCOMPILE_LOGS=cache) is read once, here.
func Open(dir string, opts ...Option) *Cache {
	o := options{memBytes: DefaultMemoryLimit, diskLimit: DefaultDiskLimit}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Cache{mem: newMemory(o.memBytes, o.memEntries), log: &logger{l: o.logger, on: logOn("cache")}}
	if o.noDisk {
		return c
	}
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			c.log.warnOnce("unwritable", "kcache: no cache directory; compiled artifacts are kept in memory only", "err", err)
			return c
		}
		dir = d
	}
	d := newDisk(dir, o.diskLimit)
	exists, writable, err := d.prepare()
	if !exists {
		c.log.warnOnce("unwritable", "kcache: cannot create the cache directory; compiled artifacts are kept in memory only", "dir", dir, "err", err)
		return c
	}
	if !writable {
		c.log.warnOnce("unwritable", "kcache: the cache directory is not writable; new compiled artifacts are kept in memory only", "dir", dir, "err", err)
	}
	c.disk = d
	c.writable.Store(writable)
	c.log.event("kcache: open", "dir", dir, "writable", writable, "disk_limit", o.diskLimit)
	return c
}

var defaultCache = sync.OnceValue(func() *Cache { return Open("") })

// Default returns the process's shared cache, opened in DefaultDir with
// the default limits on first use.
func Default() *Cache { return defaultCache() }

// Dir returns the cache's directory, or "" when it keeps entries in
// memory only.
func (c *Cache) Dir() string {
	if c.disk == nil {
		return ""
	}
	return c.disk.dir
}
