package kcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
)

// A Key names an artifact by a SHA-256 hash of everything that changes it,
// so that a changed input can never return a stale artifact: it simply
// names another entry. Its String form, 64 hex digits, names its file.
type Key [sha256.Size]byte

// String returns k in hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// short returns the first 12 hex digits of k, enough to tell entries apart
// in logs.
func (k Key) short() string { return k.String()[:12] }

// ParseKey parses the hex form of a key.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != 2*len(k) {
		return k, errors.New("kcache: key must be 64 hex digits")
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return k, errors.New("kcache: key must be 64 hex digits")
	}
	return k, nil
}

// NewKey hashes parts into a key. Each part is length-prefixed, so that
// ("ab", "c") and ("a", "bc") give different keys.
func NewKey(parts ...string) Key {
	var b KeyBuilder
	for _, p := range parts {
		b.String(p)
	}
	return b.Key()
}

// A KeyBuilder hashes the inputs of an artifact one at a time. Every input
// is length-prefixed and typed, so that no two different sequences of
// inputs hash alike. Its zero value is ready to use.
type KeyBuilder struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64 + 1]byte
}

func (b *KeyBuilder) write(tag byte, n int, p []byte, s string) {
	if b.h == nil {
		b.h = sha256.New()
	}
	b.buf[0] = tag
	m := binary.PutUvarint(b.buf[1:], uint64(n))
	b.h.Write(b.buf[:1+m])
	if p != nil {
		b.h.Write(p)
	} else {
		b.h.Write([]byte(s))
	}
}

// String adds s.
func (b *KeyBuilder) String(s string) *KeyBuilder {
	b.write('s', len(s), nil, s)
	return b
}

// Bytes adds p.
func (b *KeyBuilder) Bytes(p []byte) *KeyBuilder {
	b.write('b', len(p), p, "")
	return b
}

// Int adds n.
func (b *KeyBuilder) Int(n int64) *KeyBuilder {
	s := strconv.FormatInt(n, 10)
	b.write('i', len(s), nil, s)
	return b
}

// Strings adds a list of strings as one input, so that a list's length is
// part of the key and an empty list differs from no list at all.
func (b *KeyBuilder) Strings(list []string) *KeyBuilder {
	b.Int(int64(len(list)))
	for _, s := range list {
		b.String(s)
	}
	return b
}

// Key returns the hash of the inputs added so far.
func (b *KeyBuilder) Key() Key {
	if b.h == nil {
		b.h = sha256.New()
	}
	var k Key
	b.h.Sum(k[:0])
	return k
}

// KernelSpec lists what a compiled kernel depends on. Leaving any of it
// out of the key would let a cache hit return code built for another
// compiler, device or source.
type KernelSpec struct {
	Source         string   // the CUDA C source, as compiled
	Name           string   // file or kernel name given to the compiler (it appears in diagnostics and line info)
	CodegenVersion string   // the code generator's version: bump it when its output changes meaning
	NVRTCVersion   string   // e.g. "12.8"
	Arch           string   // target architecture, e.g. "sm_90"
	Options        []string // compiler options, in order
}

// Key returns the key of s.
func (s KernelSpec) Key() Key {
	var b KeyBuilder
	b.String("gocompile/kcache kernel")
	b.String(s.Source).String(s.Name).String(s.CodegenVersion)
	b.String(s.NVRTCVersion).String(s.Arch).Strings(s.Options)
	return b.Key()
}

// ProgramSpec lists what a compiled program (a whole graph) depends on.
type ProgramSpec struct {
	Kind    string   // the program's kind, as in Program.Kind; it versions the payload format
	Graph   string   // the normalised graph's structural key
	Guards  []string // the guards the program was specialised under, in order
	Mode    string   // compile mode, e.g. "default", "max-autotune"
	Device  string   // e.g. "cuda:sm_90" or "cpu"
	Version string   // the compiler's version: bump it when its output changes meaning
}

// Key returns the key of s.
func (s ProgramSpec) Key() Key {
	var b KeyBuilder
	b.String("gocompile/kcache program")
	b.String(s.Kind).String(s.Graph).Strings(s.Guards)
	b.String(s.Mode).String(s.Device).String(s.Version)
	return b.Key()
}
