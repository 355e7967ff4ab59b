package kcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// FormatVersion is the version of the on-disk entry format. Entries of
// any other version are misses and get rewritten, so that binaries of
// different versions never misread each other's entries.
const FormatVersion = 1

// An entry file is a fixed header, the entry's kind, and the msgp-encoded
// Entry (the payload):
//
//	off size
//	  0    4  magic "GCKC"
//	  4    2  format version, little-endian
//	  6    2  length of the kind
//	  8   32  key
//	 40    8  length of the payload
//	 48    4  CRC-32C of everything but this field
//	 52       kind, then payload
//
// The key and kind sit in the header so that listing the cache reads only
// the first bytes of each file. The checksum catches torn writes and bit
// rot; it is no defence against someone who can write the cache directory,
// which is why the directory is private to its user.
const (
	magic      = "GCKC"
	headerSize = 52
	crcOffset  = 48
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors that decoding an entry wraps; a cache treats each as a miss.
var (
	ErrTruncated = errors.New("kcache: truncated entry")
	ErrChecksum  = errors.New("kcache: entry checksum mismatch")
	ErrVersion   = errors.New("kcache: entry of another format version")
	ErrCorrupt   = errors.New("kcache: corrupt entry")
)

// EncodeEntry returns the on-disk form of e stored under key.
func EncodeEntry(key Key, e *Entry) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("kcache: invalid entry: %w", err)
	}
	if len(e.Func) > MaxLabelLen || len(e.Name) > MaxLabelLen {
		c := *e
		c.clipLabels()
		e = &c
	}
	kind := e.Kind()
	buf := make([]byte, headerSize+len(kind), headerSize+len(kind)+e.Msgsize())
	copy(buf[headerSize:], kind)
	buf, err := e.MarshalMsg(buf)
	if err != nil {
		return nil, fmt.Errorf("kcache: encoding entry: %w", err)
	}
	return frame(buf, key, kind), nil
}

// frame fills in the header of buf, which holds headerSize bytes of room,
// kind, and then the payload.
func frame(buf []byte, key Key, kind string) []byte {
	copy(buf, magic)
	binary.LittleEndian.PutUint16(buf[4:], FormatVersion)
	binary.LittleEndian.PutUint16(buf[6:], uint16(len(kind)))
	copy(buf[8:40], key[:])
	binary.LittleEndian.PutUint64(buf[40:], uint64(len(buf)-headerSize-len(kind)))
	binary.LittleEndian.PutUint32(buf[crcOffset:], checksum(buf))
	return buf
}

func checksum(buf []byte) uint32 {
	c := crc32.Update(0, crcTable, buf[:crcOffset])
	return crc32.Update(c, crcTable, buf[headerSize:])
}

// header is the part of an entry that listing needs.
type header struct {
	key        Key
	kind       string
	payloadLen uint64
}

// parseHeader reads the header and kind at the start of data, which may be
// the whole entry or only its first bytes.
func parseHeader(data []byte) (header, error) {
	var h header
	m := min(len(data), len(magic))
	if string(data[:m]) != magic[:m] {
		return h, fmt.Errorf("%w: not an entry", ErrCorrupt)
	}
	if len(data) < headerSize {
		return h, fmt.Errorf("%w: %d bytes", ErrTruncated, len(data))
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v != FormatVersion {
		return h, fmt.Errorf("%w: version %d, want %d", ErrVersion, v, FormatVersion)
	}
	n := int(binary.LittleEndian.Uint16(data[6:]))
	if n == 0 || n > maxKindLen {
		return h, fmt.Errorf("%w: kind of %d bytes", ErrCorrupt, n)
	}
	if len(data) < headerSize+n {
		return h, ErrTruncated
	}
	copy(h.key[:], data[8:40])
	h.kind = string(data[headerSize : headerSize+n])
	h.payloadLen = binary.LittleEndian.Uint64(data[40:])
	return h, nil
}

// DecodeEntry decodes an entry written by EncodeEntry and returns its key.
// It validates the format version, the length and the checksum before
// decoding, and the entry after, so that whatever the bytes it returns an
// error wrapping one of ErrTruncated, ErrChecksum, ErrVersion and
// ErrCorrupt rather than a wrong entry or a panic. The entry's byte slices
// alias data rather than copy it: artifacts can be megabytes.
func DecodeEntry(data []byte) (Key, *Entry, error) {
	h, err := parseHeader(data)
	if err != nil {
		return Key{}, nil, err
	}
	start := uint64(headerSize + len(h.kind))
	switch have := uint64(len(data)) - start; {
	case have < h.payloadLen:
		return Key{}, nil, fmt.Errorf("%w: %d of %d payload bytes", ErrTruncated, have, h.payloadLen)
	case have > h.payloadLen:
		return Key{}, nil, fmt.Errorf("%w: %d bytes after the payload", ErrCorrupt, have-h.payloadLen)
	}
	if got, want := checksum(data), binary.LittleEndian.Uint32(data[crcOffset:]); got != want {
		return Key{}, nil, fmt.Errorf("%w: CRC %08x, header says %08x", ErrChecksum, got, want)
	}
	e := new(Entry)
	rest, err := e.UnmarshalMsg(data[start:])
	switch {
	case err != nil:
		return Key{}, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	case len(rest) != 0:
		return Key{}, nil, fmt.Errorf("%w: %d bytes after the entry", ErrCorrupt, len(rest))
	}
	if err := e.validate(); err != nil {
		return Key{}, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if e.Kind() != h.kind {
		return Key{}, nil, fmt.Errorf("%w: header kind %q, entry kind %q", ErrCorrupt, h.kind, e.Kind())
	}
	return h.key, e, nil
}
