package kcache

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// EntryInfo describes an entry on disk, as Cache.Entries lists it.
type EntryInfo struct {
	Key     Key
	Kind    string    // KindKernel or a program's kind; "" when Err is set
	Func    string    // the entry's Func: the function that stored it, or ""
	Name    string    // the entry's Name: the kernel or other artifact, or ""
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
	buf := make([]byte, headerSize+maxKindLen+labelsLen)
	for _, f := range files {
		info := EntryInfo{Key: f.key, Size: f.size, ModTime: f.mtime}
		info.Kind, info.Func, info.Name, info.Err = readHeader(f.path, f.key, buf)
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b EntryInfo) int {
		return cmp.Or(b.ModTime.Compare(a.ModTime), strings.Compare(a.Key.String(), b.Key.String()))
	})
	return infos, nil
}

// labelsLen is the most bytes an encoded Entry's Func and Name take at
// its start: a map header and two keys and strings.
const labelsLen = 5 + 2*(5+5+MaxLabelLen)

// readHeader returns the kind in the header of the entry file at path,
// checking that it is stored under its own key, and the Func and Name at
// the start of its payload, reading no further.
func readHeader(path string, k Key, buf []byte) (kind, fn, name string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", "", err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", "", "", err
	}
	h, err := parseHeader(buf[:n])
	if err != nil {
		return "", "", "", err
	}
	if h.key != k {
		return "", "", "", fmt.Errorf("%w: file holds the entry of key %s", ErrCorrupt, h.key)
	}
	fn, name = readLabels(buf[headerSize+len(h.kind) : n])
	return h.kind, fn, name, nil
}

// readLabels returns the Func and Name that p, the start of an encoded
// Entry, begins with, or "" for those it does not (entries written before
// they existed). The checksum is not verified: the labels only describe.
func readLabels(p []byte) (fn, name string) {
	n, p, err := msgp.ReadMapHeaderBytes(p)
	if err != nil || n < 2 {
		return "", ""
	}
	var vals [2]string
	for i, want := range [2]string{"func", "name"} {
		var key []byte
		if key, p, err = msgp.ReadMapKeyZC(p); err != nil || string(key) != want {
			return "", ""
		}
		if vals[i], p, err = msgp.ReadStringBytes(p); err != nil {
			return "", ""
		}
	}
	return vals[0], vals[1]
}
