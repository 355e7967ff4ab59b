package kcache

import (
	"log/slog"
	"time"
)

// Stats counts what a cache did since it was opened, and what it holds.
type Stats struct {
	Dir          string // the cache's directory; "" when memory-only
	DiskWritable bool   // new entries are written to Dir

	MemoryHits   int64   // lookups served from memory
	DiskHits     int64   // lookups served from disk
	Misses       int64   // lookups found nowhere (GetOrCompute then computes)
	Deduplicated int64   // GetOrCompute calls that waited for another call's lookup instead of doing their own
	Errors       int64   // computes that failed or returned an invalid entry
	Corrupt      int64   // entry files that could not be used: truncated, corrupt, another version, unreadable
	Writes       int64   // entry files written
	SavedSeconds float64 // compile time the hits saved: the sum of their entries' CompileSeconds

	MemoryEntries   int   // entries in memory
	MemoryBytes     int64 // their approximate size
	MemoryEvictions int64 // entries dropped from memory to stay within its limits

	// The disk counts are this process's view: exact after it scans the
	// directory, then updated by its own writes until the next scan.
	DiskEntries   int64
	DiskBytes     int64
	DiskEvictions int64 // entry files this process removed to stay within the disk limit
}

// Stats returns the cache's statistics. The first call in a process scans
// the cache directory to count its entries.
func (c *Cache) Stats() Stats {
	s := Stats{
		MemoryHits:   c.memHits.Load(),
		DiskHits:     c.diskHits.Load(),
		Misses:       c.misses.Load(),
		Deduplicated: c.dedup.Load(),
		Errors:       c.errs.Load(),
		Corrupt:      c.corrupt.Load(),
		Writes:       c.writes.Load(),
		SavedSeconds: time.Duration(c.savedNanos.Load()).Seconds(),
	}
	s.MemoryEntries, s.MemoryBytes, s.MemoryEvictions = c.mem.stats()
	if c.disk != nil {
		s.Dir = c.disk.dir
		s.DiskWritable = c.writable.Load()
		s.DiskEntries, s.DiskBytes, s.DiskEvictions = c.disk.counts(time.Now())
	}
	return s
}

// LogValue makes Stats log as a group of its fields.
func (s Stats) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("dir", s.Dir),
		slog.Bool("disk_writable", s.DiskWritable),
		slog.Int64("memory_hits", s.MemoryHits),
		slog.Int64("disk_hits", s.DiskHits),
		slog.Int64("misses", s.Misses),
		slog.Int64("deduplicated", s.Deduplicated),
		slog.Int64("errors", s.Errors),
		slog.Int64("corrupt", s.Corrupt),
		slog.Int64("writes", s.Writes),
		slog.Float64("saved_s", s.SavedSeconds),
		slog.Int("memory_entries", s.MemoryEntries),
		slog.Int64("memory_bytes", s.MemoryBytes),
		slog.Int64("memory_evictions", s.MemoryEvictions),
		slog.Int64("disk_entries", s.DiskEntries),
		slog.Int64("disk_bytes", s.DiskBytes),
		slog.Int64("disk_evictions", s.DiskEvictions),
	)
}

// LogStats logs the cache's statistics when GOCOMPILE_LOGS names cache; a
// program calls it when it is done compiling, or at exit.
func (c *Cache) LogStats() {
	if c.log.on {
		c.log.slog().Info("kcache: stats", "stats", c.Stats())
	}
}
