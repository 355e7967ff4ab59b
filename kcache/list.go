package kcache

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// EntryInfo describes an entry on disk, as Cache.Entries lists it.
type EntryInfo struct {
	Key     Key
	Kind    string    // KindKernel or a program's kind; "" when Err is set
	Size    int64     // bytes on disk
	ModTime time.Time // when the entry was last written or used
	Err     error     // why the entry's header is unusable, or nil
}

// list describes every entry file, reading only its header, most
// recently used first.
func (d *disk) list(now time.Time) ([]EntryInfo, error) {
	files, err := d.scan(now)
	if err != nil {
		return nil, err
	}
	infos := make([]EntryInfo, 0, len(files))
	buf := make([]byte, headerSize+maxKindLen)
	for _, f := range files {
		info := EntryInfo{Key: f.key, Size: f.size, ModTime: f.mtime}
		info.Kind, info.Err = readHeader(f.path, f.key, buf)
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b EntryInfo) int {
		return cmp.Or(b.ModTime.Compare(a.ModTime), strings.Compare(a.Key.String(), b.Key.String()))
	})
	return infos, nil
}

// readHeader returns the kind in the header of the entry file at path,
// checking that it is stored under its own key.
func readHeader(path string, k Key, buf []byte) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	h, err := parseHeader(buf[:n])
	if err != nil {
		return "", err
	}
	if h.key != k {
		return "", fmt.Errorf("%w: file holds the entry of key %s", ErrCorrupt, h.key)
	}
	return h.kind, nil
}
