package kcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
	}{
		{"kernel", kernelEntry("abc", 1000)},
		{"ptx only", Entry{Kernel: &Kernel{Arch: "compute_90", PTX: []byte("ptx")}}},
		{"program", programEntry("p")},
		{"empty payload", Entry{Program: &Program{Kind: "x"}}},
		{"labels", Entry{Func: "main.f", Name: "k", Program: &Program{Kind: "x", Payload: []byte("p")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKey(tt.name)
			data, err := EncodeEntry(k, &tt.e)
			if err != nil {
				t.Fatal(err)
			}
			got, e, err := DecodeEntry(data)
			if err != nil {
				t.Fatal(err)
			}
			if got != k {
				t.Errorf("key = %s, want %s", got, k)
			}
			normalize(e)
			want := tt.e
			normalize(&want)
			if !reflect.DeepEqual(*e, want) {
				t.Errorf("decoded %+v, want %+v", *e, want)
			}
		})
	}
}

// normalize makes empty slices nil, as decoding leaves them either way.
func normalize(e *Entry) {
	if k := e.Kernel; k != nil {
		if len(k.CUBIN) == 0 {
			k.CUBIN = nil
		}
		if len(k.PTX) == 0 {
			k.PTX = nil
		}
		if len(k.Functions) == 0 {
			k.Functions = nil
		}
	}
	if p := e.Program; p != nil && len(p.Payload) == 0 {
		p.Payload = nil
	}
}

func TestEncodeInvalid(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
	}{
		{"empty", Entry{}},
		{"both", Entry{Kernel: &Kernel{PTX: []byte("x")}, Program: &Program{Kind: "x"}}},
		{"no code", Entry{Kernel: &Kernel{Arch: "sm_90"}}},
		{"no kind", Entry{Program: &Program{}}},
		{"kernel kind", Entry{Program: &Program{Kind: KindKernel}}},
		{"long kind", Entry{Program: &Program{Kind: string(make([]byte, 256))}}},
		{"negative time", Entry{Program: &Program{Kind: "x"}, CompileSeconds: -1}},
		{"endless time", Entry{Program: &Program{Kind: "x"}, CompileSeconds: math.Inf(1)}},
		{"too many functions", Entry{Kernel: &Kernel{PTX: []byte("x"), Functions: make([]Function, maxFunctions+1)}}},
	}
	for _, tt := range tests {
		if _, err := EncodeEntry(Key{}, &tt.e); err == nil {
			t.Errorf("%s: EncodeEntry succeeded", tt.name)
		}
	}
}

// reframe returns data with a payload and kind replaced and the header's
// length and checksum made to match, as a writer that encoded something
// wrong would.
func reframe(kind string, payload []byte) []byte {
	buf := make([]byte, headerSize+len(kind), headerSize+len(kind)+len(payload))
	copy(buf[headerSize:], kind)
	return frame(append(buf, payload...), NewKey("reframe"), kind)
}

func TestDecodeErrors(t *testing.T) {
	e := kernelEntry("xyz", 300)
	good, err := EncodeEntry(NewKey("k"), &e)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	payload := good[headerSize+len(KindKernel):]
	invalid, _ := (&Entry{}).MarshalMsg(nil)

	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"magic only", good[:4], ErrTruncated},
		{"header only", good[:headerSize], ErrTruncated},
		{"half", good[:len(good)/2], ErrTruncated},
		{"one byte short", good[:len(good)-1], ErrTruncated},
		{"not an entry", []byte("hello, world"), ErrCorrupt},
		{"trailing bytes", append(bytes.Clone(good), 0), ErrCorrupt},
		{"flipped payload bit", edit(func(b []byte) []byte { b[len(b)-10] ^= 1; return b }), ErrChecksum},
		{"flipped key bit", edit(func(b []byte) []byte { b[9] ^= 1; return b }), ErrChecksum},
		{"other version", edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], FormatVersion+1); return b }), ErrVersion},
		{"zero kind", edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[6:], 0); return b }), ErrCorrupt},
		{"huge length", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[40:], 1<<62); return b }), ErrTruncated},
		{"kind mismatch", reframe("other", payload), ErrCorrupt},
		{"garbage payload", reframe(KindKernel, []byte{0xc1, 0x00}), ErrCorrupt},
		{"invalid entry", reframe(KindKernel, invalid), ErrCorrupt},
		{"trailing msgp", reframe(KindKernel, append(bytes.Clone(payload), 0xc0)), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e, err := DecodeEntry(tt.data)
			if !errors.Is(err, tt.want) {
				t.Errorf("DecodeEntry = %v, want %v", err, tt.want)
			}
			if e != nil {
				t.Errorf("DecodeEntry returned an entry with error %v", err)
			}
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for i, e := range []Entry{kernelEntry("fuzz", 64), programEntry("fuzz"), {Kernel: &Kernel{PTX: []byte{0}}}} {
		data, err := EncodeEntry(NewKey(string(rune('a'+i))), &e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[headerSize+len(e.Kind()):])
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(data []byte) {
			k, e, err := DecodeEntry(data)
			if err != nil {
				if e != nil {
					t.Fatalf("DecodeEntry returned an entry and error %v", err)
				}
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeEntry error %v wraps none of the Err values", err)
				}
				return
			}
			// What decodes must encode again to an entry that decodes alike.
			again, err := EncodeEntry(k, e)
			if err != nil {
				t.Fatalf("re-encoding a decoded entry: %v", err)
			}
			k2, e2, err := DecodeEntry(again)
			if err != nil || k2 != k || !reflect.DeepEqual(normalized(e), normalized(e2)) {
				t.Fatalf("round trip changed the entry: %v", err)
			}
		}
		// As a whole file, mostly rejected by the header checks.
		check(data)
		// As a payload behind a valid header, to reach the msgp decoder.
		for _, kind := range []string{KindKernel, "test.program/v1"} {
			check(reframe(kind, data))
		}
	})
}

func normalized(e *Entry) *Entry {
	c := *e
	if e.Kernel != nil {
		k := *e.Kernel
		c.Kernel = &k
	}
	if e.Program != nil {
		p := *e.Program
		c.Program = &p
	}
	normalize(&c)
	return &c
}
