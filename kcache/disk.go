package kcache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// disk is the on-disk half of a cache: one file per entry under
// dir/<first two hex digits of the key>/<key>, so that no directory grows
// too large. Several processes may share a directory, so disk keeps no
// index: a file's presence is the entry, its mtime its last use.
type disk struct {
	dir      string
	limit    int64 // bytes; ≤ 0: unbounded
	maxEntry int64 // files larger than this are not read

	mu        sync.Mutex // guards the fields below
	scanned   bool       // bytes and entries have been counted
	bytes     int64      // approximate: other processes write too
	entries   int64
	sinceScan int64 // bytes this process wrote since the last count
	evictions int64

	pruneMu sync.Mutex // one prune at a time in this process
}

// staleTemp is how old a temporary file must be before a scan removes it
// as the leftover of a writer that died between create and rename.
const staleTemp = time.Hour

func newDisk(dir string, limit int64) *disk {
	d := &disk{dir: dir, limit: limit, maxEntry: 1 << 32}
	if limit > 0 {
		d.maxEntry = limit
	}
	return d
}

// prepare creates the directory and reports whether it exists and can be
// written, with the error that says why not.
func (d *disk) prepare() (exists, writable bool, err error) {
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return false, false, err
	}
	f, err := os.CreateTemp(d.dir, ".probe*")
	if err != nil {
		return true, false, err
	}
	f.Close()
	os.Remove(f.Name())
	// Tell backup tools that the directory can be rebuilt.
	tag := filepath.Join(d.dir, "CACHEDIR.TAG")
	if _, err := os.Stat(tag); errors.Is(err, fs.ErrNotExist) {
		os.WriteFile(tag, []byte("Signature: 8a477f597d28d172789f06886806bc55\n# gocompile's compiled-artifact cache: see go doc gocompile/kcache.\n"), 0o600)
	}
	return true, true, nil
}

func (d *disk) path(k Key) string {
	s := k.String()
	return filepath.Join(d.dir, s[:2], s)
}

// read returns the bytes of k's file; a missing file is fs.ErrNotExist.
func (d *disk) read(k Key) ([]byte, error) {
	f, err := os.Open(d.path(k))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrCorrupt)
	}
	if fi.Size() > d.maxEntry {
		return nil, fmt.Errorf("%w: %d bytes, more than the cache's limit", ErrCorrupt, fi.Size())
	}
	// Read one byte past the size, so that a file another process
	// replaced since Stat is not silently cut short.
	buf := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, buf)
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%w: file grew while read", ErrCorrupt)
		}
		return nil, err
	}
	return buf[:n], nil
}

// touch marks k's file used now, for least-recently-used eviction.
// Failing is harmless (a read-only directory): the entry only looks older.
func (d *disk) touch(k Key, now time.Time) {
	os.Chtimes(d.path(k), now, now)
}

// write stores data as k's file. It writes a temporary file in the same
// directory and renames it over the entry, so that readers, in this
// process or another, see the old file or the new one, never a mix; when
// two processes write one key, the last rename wins and both wrote the
// same valid entry. There is no fsync: a file cut short by a crash fails
// its length or checksum check and is rebuilt, which is cheaper than
// syncing every compile.
func (d *disk) write(k Key, data []byte) error {
	p := d.path(k)
	shard := filepath.Dir(p)
	if err := os.MkdirAll(shard, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(shard, "."+filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var old int64 = -1
	if fi, serr := os.Lstat(p); serr == nil {
		old = fi.Size()
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old < 0 {
		d.entries++
		old = 0
	}
	d.bytes += int64(len(data)) - old
	d.sinceScan += int64(len(data))
	return nil
}
