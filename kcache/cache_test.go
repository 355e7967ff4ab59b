package kcache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHitMiss(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, dir)
	k := NewKey("hit-miss")
	want := kernelEntry("hm", 100)
	computes := 0
	compute := func() (Entry, error) { computes++; return want, nil }

	// Each step is a lookup and the counts it leaves.
	steps := []struct {
		name                          string
		cache                         func() *Cache
		memHits, diskHits, misses, nc int64
	}{
		{"first lookup computes", func() *Cache { return c }, 0, 0, 1, 1},
		{"second is a memory hit", func() *Cache { return c }, 1, 0, 1, 1},
		{"new cache, same dir: disk hit", func() *Cache { c, _ = openTest(t, dir); return c }, 0, 1, 0, 1},
		{"then a memory hit", func() *Cache { return c }, 1, 1, 0, 1},
		{"memory-only cache computes", func() *Cache { c, _ = openTest(t, "", WithoutDisk()); return c }, 0, 0, 1, 2},
	}
	for _, s := range steps {
		c := s.cache()
		got, err := c.GetOrCompute(k, compute)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !bytes.Equal(got.Kernel.CUBIN, want.Kernel.CUBIN) || got.Kernel.Functions[0].Name != "k_hm" {
			t.Errorf("%s: got a different entry", s.name)
		}
		st := c.Stats()
		if st.MemoryHits != s.memHits || st.DiskHits != s.diskHits || st.Misses != s.misses || int64(computes) != s.nc {
			t.Errorf("%s: memory hits %d, disk hits %d, misses %d, computes %d; want %d, %d, %d, %d",
				s.name, st.MemoryHits, st.DiskHits, st.Misses, computes, s.memHits, s.diskHits, s.misses, s.nc)
		}
	}
}

func TestGetPutStats(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, dir)
	k := NewKey("get-put")
	if _, ok := c.Get(k); ok {
		t.Fatal("Get found an entry in an empty cache")
	}
	if err := c.Put(k, programEntry("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(k, Entry{}); err == nil {
		t.Error("Put of an empty entry succeeded")
	}
	c2, _ := openTest(t, dir)
	e, ok := c2.Get(k)
	if !ok || string(e.Program.Payload) != "payload a" || e.Kind() != "test.program/v1" {
		t.Fatalf("Get from a new cache = %+v, %v", e, ok)
	}
	c2.Get(k)
	st := c2.Stats()
	if st.DiskHits != 1 || st.MemoryHits != 1 || st.SavedSeconds != 3 {
		t.Errorf("stats %+v: want 1 disk hit, 1 memory hit, 3 s saved", st)
	}
	if st.DiskEntries != 1 || st.DiskBytes == 0 || st.Dir != dir || !st.DiskWritable {
		t.Errorf("stats %+v: want one entry on disk in %s", st, dir)
	}
}

// TestBadFiles damages an entry file in each way a crash, a disk or
// another version can, and checks that a new process treats it as a miss,
// warns once, and rewrites it.
func TestBadFiles(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte) []byte
		warns  int
		perm   os.FileMode // the file's mode after damage, if not 0
	}{
		{"empty", func(b []byte) []byte { return nil }, 1, 0},
		{"truncated", func(b []byte) []byte { return b[:len(b)-7] }, 1, 0},
		{"header cut", func(b []byte) []byte { return b[:20] }, 1, 0},
		{"bit flip", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, 1, 0},
		{"garbage", func(b []byte) []byte { return []byte("#!/bin/sh\necho not an entry\n") }, 1, 0},
		{"other version", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], FormatVersion+1); return b }, 0, 0},
		{"another key's entry", func([]byte) []byte {
			e := programEntry("other")
			b, _ := EncodeEntry(NewKey("other"), &e)
			return b
		}, 1, 0},
		{"unreadable", func(b []byte) []byte { return b }, 1, 0o200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			k := NewKey("bad", tt.name)
			c, _ := openTest(t, dir)
			if err := c.Put(k, kernelEntry("bad", 500)); err != nil {
				t.Fatal(err)
			}
			path := c.disk.path(k)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.perm != 0 {
				if err := os.Chmod(path, tt.perm); err != nil {
					t.Fatal(err)
				}
				if _, err := os.ReadFile(path); err == nil {
					t.Skip("the file is readable despite its mode (running as root?)")
				}
			}

			c, rec := openTest(t, dir)
			for range 2 {
				if _, ok := c.Get(k); ok {
					t.Fatal("Get found a damaged entry")
				}
			}
			if got := rec.count(slog.LevelWarn); got != tt.warns {
				t.Errorf("%d warnings, want %d:\n%s", got, tt.warns, rec)
			}
			if got := c.Stats().Corrupt; got != 2 {
				t.Errorf("Stats().Corrupt = %d, want 2", got)
			}
			computed := false
			e, err := c.GetOrCompute(k, func() (Entry, error) { computed = true; return kernelEntry("bad", 500), nil })
			if err != nil || !computed || e.Kernel == nil {
				t.Fatalf("GetOrCompute = %v, %v; computed %v", e, err, computed)
			}
			b, err = os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, _, err := DecodeEntry(b); err != nil || got != k {
				t.Errorf("the rewritten file does not decode: %v", err)
			}
		})
	}
}

// TestUnwritable checks that a directory the cache cannot write, or
// cannot create, leaves a working memory-only cache and one warning.
func TestUnwritable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string
	}{
		{"read-only directory", func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "ro")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			if f, err := os.CreateTemp(dir, "probe"); err == nil {
				f.Close()
				os.Remove(f.Name())
				t.Skip("the directory is writable despite mode 0500 (running as root?)")
			}
			return dir
		}},
		{"read-only shard", func(t *testing.T) string {
			dir := t.TempDir()
			// Every key of the test starts with its own shard: make them
			// all unwritable so that the probe succeeds but writes fail.
			for i := range 256 {
				p := filepath.Join(dir, fmt.Sprintf("%02x", i))
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}},
		{"path through a file", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(f, "cache")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			c, rec := openTest(t, dir)
			for i := range 5 {
				k := NewKey("unwritable", fmt.Sprint(i))
				if _, err := c.GetOrCompute(k, func() (Entry, error) { return programEntry(fmt.Sprint(i)), nil }); err != nil {
					t.Fatal(err)
				}
				e, ok := c.Get(k)
				if !ok || string(e.Program.Payload) != "payload "+fmt.Sprint(i) {
					t.Fatalf("Get(%d) = %v, %v: want the entry from memory", i, e, ok)
				}
			}
			if got := rec.count(slog.LevelWarn); got != 1 {
				t.Errorf("%d warnings, want 1:\n%s", got, rec)
			}
			st := c.Stats()
			if st.DiskWritable || st.Writes != 0 || st.MemoryEntries != 5 {
				t.Errorf("stats %+v: want no disk writes and 5 entries in memory", st)
			}
		})
	}
}

// TestDiskEviction fills a cache past its limit and checks that it stays
// under the limit by removing the least recently used entries.
func TestDiskEviction(t *testing.T) {
	dir := t.TempDir()
	const limit = 20 << 10
	c, _ := openTest(t, dir, WithDiskLimit(limit))
	size := func(k Key) int64 {
		fi, err := os.Stat(c.disk.path(k))
		if err != nil {
			return -1
		}
		return fi.Size()
	}

	// Ten 1.5 KiB entries, used one minute apart, oldest first.
	var keys []Key
	start := time.Now().Add(-time.Hour)
	for i := range 10 {
		k := NewKey("evict", fmt.Sprint(i))
		keys = append(keys, k)
		if err := c.Put(k, kernelEntry(fmt.Sprint(i), 1500)); err != nil {
			t.Fatal(err)
		}
		mt := start.Add(time.Duration(i) * time.Minute)
		os.Chtimes(c.disk.path(k), mt, mt)
	}
	entrySize := size(keys[0])

	// Another process uses entry 0, the oldest.
	c2, _ := openTest(t, dir, WithDiskLimit(limit))
	if _, ok := c2.Get(keys[0]); !ok {
		t.Fatal("entry 0 is missing")
	}

	// Writing 5 more must evict: entries 1, 2, … go first, entry 0 stays.
	for i := 10; i < 15; i++ {
		if err := c.Put(NewKey("evict", fmt.Sprint(i)), kernelEntry(fmt.Sprint(i), 1500)); err != nil {
			t.Fatal(err)
		}
		var total int64
		infos, err := c.Entries()
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			total += info.Size
		}
		if total > limit {
			t.Fatalf("after writing entry %d the cache holds %d bytes, more than its limit %d", i, total, limit)
		}
	}
	if size(keys[0]) != entrySize {
		t.Error("the recently used entry 0 was evicted")
	}
	if size(keys[1]) >= 0 || size(keys[2]) >= 0 {
		t.Error("the least recently used entries 1 and 2 were kept")
	}
	// Eviction goes by age: once some old entry is gone, all older ones are.
	gone := false
	for i := len(keys) - 1; i >= 1; i-- {
		if size(keys[i]) < 0 {
			gone = true
		} else if gone {
			t.Errorf("entry %d was kept although a more recently used one was evicted", i)
		}
	}
	if st := c.Stats(); st.DiskEvictions == 0 || st.DiskBytes > limit {
		t.Errorf("stats %+v: want evictions and at most %d bytes", st, limit)
	}
}

func TestPruneClearEntries(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, dir)
	for i := range 6 {
		e := kernelEntry(fmt.Sprint(i), 1000)
		if i%2 == 1 {
			e = programEntry(fmt.Sprint(i))
		}
		if err := c.Put(NewKey("prune", fmt.Sprint(i)), e); err != nil {
			t.Fatal(err)
		}
	}
	// A stray file and a stale temporary file.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep me"), 0o600)
	stale := filepath.Join(dir, "ab", ".abcd.tmp123")
	os.MkdirAll(filepath.Dir(stale), 0o700)
	os.WriteFile(stale, []byte("partial"), 0o600)
	old := time.Now().Add(-2 * staleTemp)
	os.Chtimes(stale, old, old)

	infos, err := c.Entries()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, info := range infos {
		if info.Err != nil {
			t.Errorf("entry %s: %v", info.Key, info.Err)
		}
		kinds[info.Kind]++
	}
	if len(infos) != 6 || kinds[KindKernel] != 3 || kinds["test.program/v1"] != 3 {
		t.Errorf("Entries found %d entries of kinds %v; want 3 kernels and 3 programs", len(infos), kinds)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale temporary file was kept")
	}

	n, freed, err := c.Prune(2500)
	if err != nil || n == 0 || freed == 0 {
		t.Fatalf("Prune = %d, %d, %v", n, freed, err)
	}
	if st := c.Stats(); st.DiskBytes > 2500 {
		t.Errorf("after Prune(2500) the cache holds %d bytes", st.DiskBytes)
	}

	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if infos, _ := c.Entries(); len(infos) != 0 {
		t.Errorf("after Clear %d entries are left", len(infos))
	}
	if st := c.Stats(); st.MemoryEntries != 0 || st.DiskEntries != 0 {
		t.Errorf("after Clear: stats %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error("Clear removed a file that is not the cache's")
	}
}

func TestMemoryLimits(t *testing.T) {
	one := kernelEntry("x", 1000)
	tests := []struct {
		name string
		opts []Option
		keep int
	}{
		{"by entries", []Option{WithMaxEntries(3)}, 3},
		{"by bytes", []Option{WithMemoryLimit(3 * one.size())}, 3},
		{"unbounded", []Option{WithMemoryLimit(0)}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := openTest(t, "", append(tt.opts, WithoutDisk())...)
			for i := range 8 {
				c.Put(NewKey(fmt.Sprint(i)), kernelEntry("x", 1000))
				c.Get(NewKey("0")) // keep 0 recently used
			}
			st := c.Stats()
			if st.MemoryEntries != tt.keep || st.MemoryEvictions != int64(8-tt.keep) {
				t.Errorf("%d entries and %d evictions; want %d and %d", st.MemoryEntries, st.MemoryEvictions, tt.keep, 8-tt.keep)
			}
			if _, ok := c.Get(NewKey("0")); !ok {
				t.Error("the most recently used entry was evicted")
			}
			if _, ok := c.Get(NewKey("7")); !ok {
				t.Error("the newest entry was evicted")
			}
		})
	}
}

func TestSingleflight(t *testing.T) {
	c, _ := openTest(t, t.TempDir())
	k := NewKey("singleflight")
	var calls atomic.Int32
	release := make(chan struct{})
	var wg, started sync.WaitGroup
	const n = 50
	started.Add(n)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			e, err := c.GetOrCompute(k, func() (Entry, error) {
				calls.Add(1)
				<-release
				return programEntry("sf"), nil
			})
			if err == nil && string(e.Program.Payload) != "payload sf" {
				err = errors.New("wrong entry")
			}
			errs <- err
		}()
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond) // let the goroutines reach GetOrCompute
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("compute ran %d times, want 1", got)
	}
	st := c.Stats()
	if st.Misses != 1 || st.Deduplicated+st.MemoryHits != n-1 {
		t.Errorf("stats %+v: want 1 miss and %d deduplicated calls or hits", st, n-1)
	}
}

func TestComputeErrorAndPanic(t *testing.T) {
	c, _ := openTest(t, t.TempDir())
	k := NewKey("error")
	boom := errors.New("boom")
	if _, err := c.GetOrCompute(k, func() (Entry, error) { return Entry{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("GetOrCompute error = %v, want boom", err)
	}
	if _, err := c.GetOrCompute(k, func() (Entry, error) { return Entry{}, nil }); err == nil {
		t.Fatal("an invalid computed entry was accepted")
	}
	if _, err := c.GetOrCompute(k, func() (Entry, error) { return programEntry("ok"), nil }); err != nil {
		t.Fatalf("a failed compute was cached: %v", err)
	}
	type myPanic struct{}
	func() {
		defer func() {
			if r := recover(); r != (myPanic{}) {
				t.Errorf("recovered %v, want the compute's panic value", r)
			}
		}()
		c.GetOrCompute(NewKey("panic"), func() (Entry, error) { panic(myPanic{}) })
	}()
	if st := c.Stats(); st.Errors != 3 {
		t.Errorf("Stats().Errors = %d, want 3", st.Errors)
	}
}

func TestCompileAll(t *testing.T) {
	c, _ := openTest(t, t.TempDir())
	const n = 40
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = NewKey("all", fmt.Sprint(i%30)) // ten repeats
	}
	var running, peak, calls atomic.Int32
	entries, err := c.CompileAll(context.Background(), keys, func(ctx context.Context, i int) (Entry, error) {
		calls.Add(1)
		r := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		return programEntry(fmt.Sprint(i % 30)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if want := "payload " + fmt.Sprint(i%30); e.Program == nil || string(e.Program.Payload) != want {
			t.Errorf("entry %d = %+v, want %q", i, e, want)
		}
	}
	if got := peak.Load(); got > int32(runtime.NumCPU()) {
		t.Errorf("%d computes ran at once; the limit is %d", got, runtime.NumCPU())
	}
	if got := calls.Load(); got > 30 {
		t.Errorf("compute ran %d times for 30 distinct keys", got)
	}

	// An error stops the rest.
	boom := errors.New("boom")
	keys = []Key{NewKey("e0"), NewKey("e1"), NewKey("e2")}
	_, err = c.CompileAll(context.Background(), keys, func(ctx context.Context, i int) (Entry, error) {
		if i == 1 {
			return Entry{}, boom
		}
		return programEntry("e"), nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("CompileAll error = %v, want boom", err)
	}

	// A canceled context starts nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.CompileAll(ctx, []Key{NewKey("c0")}, func(ctx context.Context, i int) (Entry, error) {
		return programEntry("c"), nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CompileAll with a canceled context = %v", err)
	}

	// A panicking compute panics in the caller, where it can be recovered,
	// not in a worker goroutine, where it would end the process.
	type myPanic struct{}
	func() {
		defer func() {
			if r := recover(); r != (myPanic{}) {
				t.Errorf("recovered %v, want the compute's panic value", r)
			}
		}()
		c.CompileAll(context.Background(), []Key{NewKey("p0"), NewKey("p1")}, func(ctx context.Context, i int) (Entry, error) {
			if i == 1 {
				panic(myPanic{})
			}
			return programEntry("p"), nil
		})
	}()

	// Missing arguments are errors.
	if _, err := c.CompileAll(context.Background(), keys, nil); err == nil {
		t.Error("CompileAll with a nil compute: no error")
	}
	if _, err := c.CompileAll(nil, keys, func(context.Context, int) (Entry, error) { return programEntry("n"), nil }); err == nil {
		t.Error("CompileAll with a nil context: no error")
	}
	if _, err := c.GetOrCompute(NewKey("nil compute"), nil); err == nil {
		t.Error("GetOrCompute with a nil compute: no error")
	}
}

func TestLogs(t *testing.T) {
	t.Setenv("GOCOMPILE_LOGS", "graph, cache")
	c, rec := openTest(t, t.TempDir())
	k := NewKey("logs")
	c.GetOrCompute(k, func() (Entry, error) { return programEntry("l"), nil })
	c.GetOrCompute(k, func() (Entry, error) { return programEntry("l"), nil })
	c.LogStats()
	log := rec.String()
	for _, want := range []string{"kcache: miss", "kcache: write", "kcache: hit", "where=memory", "kcache: stats", "memory_hits=1"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}

	t.Setenv("GOCOMPILE_LOGS", "graph")
	c, rec = openTest(t, c.Dir())
	c.GetOrCompute(k, func() (Entry, error) { return programEntry("l"), nil })
	c.LogStats()
	if len(rec.records) != 0 {
		t.Errorf("logged without GOCOMPILE_LOGS=cache:\n%s", rec)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("GOCOMPILE_CACHE_DIR", "/some/where")
	if d, err := DefaultDir(); err != nil || d != "/some/where" {
		t.Errorf("DefaultDir = %q, %v with GOCOMPILE_CACHE_DIR set", d, err)
	}
	dir := filepath.Join(t.TempDir(), "env")
	t.Setenv("GOCOMPILE_CACHE_DIR", dir)
	c, _ := openTest(t, "")
	if c.Dir() != dir {
		t.Errorf("Open(\"\").Dir() = %q, want %q", c.Dir(), dir)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory: %v, %v; want mode 0700", fi, err)
	}
	t.Setenv("GOCOMPILE_CACHE_DIR", "")
	if d, err := DefaultDir(); err == nil && filepath.Base(d) != "gocompile" {
		t.Errorf("DefaultDir = %q", d)
	}
}
