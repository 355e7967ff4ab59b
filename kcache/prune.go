package kcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// needsScan reports whether the counts are stale enough to recount: never
// counted, over the limit, or enough written since the last count that
// other processes' writes may matter. Recounting after an eighth of the
// limit bounds how far several processes together overshoot it.
func (d *disk) needsScan() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.scanned || (d.limit > 0 && (d.bytes > d.limit || d.sinceScan > d.limit/8))
}

// file is an entry file found by a scan.
type file struct {
	path  string
	key   Key
	size  int64
	mtime time.Time
}

// isShard reports whether name is a shard directory's name.
func isShard(name string) bool {
	return len(name) == 2 && isHex(name)
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isTemp reports whether name is a temporary file of write.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp")
}

// scan lists the entry files, removes temporary files older than
// staleTemp, and recounts the cache's size.
func (d *disk) scan(now time.Time) ([]file, error) {
	shards, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var files []file
	var total int64
	for _, s := range shards {
		if !s.IsDir() || !isShard(s.Name()) {
			continue
		}
		dir := filepath.Join(d.dir, s.Name())
		des, err := os.ReadDir(dir)
		if err != nil {
			continue // removed by a concurrent clear, or unreadable
		}
		for _, de := range des {
			name := de.Name()
			fi, err := de.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if isTemp(name) {
				if now.Sub(fi.ModTime()) > staleTemp {
					os.Remove(filepath.Join(dir, name))
				}
				continue
			}
			k, err := ParseKey(name)
			if err != nil || name[:2] != s.Name() {
				continue
			}
			files = append(files, file{filepath.Join(dir, name), k, fi.Size(), fi.ModTime()})
			total += fi.Size()
		}
	}
	d.mu.Lock()
	d.scanned = true
	d.bytes, d.entries, d.sinceScan = total, int64(len(files)), 0
	d.mu.Unlock()
	return files, nil
}

// prune removes least recently used entries until the cache holds at
// most target bytes, and returns how many files and bytes it removed.
// Another process may be pruning too; removing a file twice is harmless.
func (d *disk) prune(target int64, now time.Time) (n int, freed int64, err error) {
	d.pruneMu.Lock()
	defer d.pruneMu.Unlock()
	files, err := d.scan(now)
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	slices.SortFunc(files, func(a, b file) int { return a.mtime.Compare(b.mtime) })
	for _, f := range files {
		if total <= target {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		total -= f.size
		freed += f.size
		n++
	}
	d.mu.Lock()
	d.bytes -= freed
	d.entries -= int64(n)
	d.evictions += int64(n)
	d.mu.Unlock()
	return n, freed, nil
}

// maybePrune recounts the cache when needsScan says so, and prunes it to
// nine tenths of its limit when it is over: the slack keeps every write
// after that from pruning again.
func (d *disk) maybePrune(now time.Time) (n int, freed int64, err error) {
	if !d.needsScan() || !d.pruneMu.TryLock() {
		return 0, 0, nil
	}
	files, err := d.scan(now)
	d.pruneMu.Unlock()
	if err != nil || d.limit <= 0 {
		return 0, 0, err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	if total <= d.limit {
		return 0, 0, nil
	}
	return d.prune(d.limit-d.limit/10, now)
}

// clear removes every entry and temporary file, and the emptied shard
// directories; other files in the directory are left alone.
func (d *disk) clear() error {
	d.pruneMu.Lock()
	defer d.pruneMu.Unlock()
	shards, err := os.ReadDir(d.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, s := range shards {
		if !s.IsDir() || !isShard(s.Name()) {
			continue
		}
		dir := filepath.Join(d.dir, s.Name())
		des, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, de := range des {
			if _, kerr := ParseKey(de.Name()); kerr == nil || isTemp(de.Name()) {
				if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		os.Remove(dir) // fails, harmlessly, when something else is in it
	}
	d.mu.Lock()
	d.scanned = false
	d.mu.Unlock()
	return errors.Join(errs...)
}

// counts returns the entries and bytes on disk, counting them first when
// this process has not yet.
func (d *disk) counts(now time.Time) (entries, bytes, evictions int64) {
	d.mu.Lock()
	scanned := d.scanned
	d.mu.Unlock()
	if !scanned {
		d.scan(now)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.entries, d.bytes, d.evictions
}
