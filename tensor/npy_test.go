package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio"
	"gonum.org/v1/gonum/mat"
)

// serTestTensor returns a tensor of dt and shape with varied values.
func serTestTensor(seed uint64, dt DType, shape ...int) *Tensor {
	switch dt {
	case Int32, Int64:
		return NewGenerator(seed).RandInt(-1<<20, 1<<20, shape...).To(dt)
	case Bool:
		return NewGenerator(seed).RandInt(0, 2, shape...).To(Bool)
	}
	return NewGenerator(seed).Randn(Float64, shape...).MulScalar(100).To(dt)
}

// serBits is t's elements in row-major order as little-endian bytes.
func serBits(t *Tensor) []byte {
	return append([]byte(nil), serContiguousLE(t.cpu().v)...)
}

func serSameTensor(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	if got.DType() != want.DType() {
		t.Fatalf("%s: dtype %v, want %v", what, got.DType(), want.DType())
	}
	if !slices.Equal(got.Shape(), want.Shape()) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
	}
	if got.Device() != DefaultDevice() {
		t.Fatalf("%s: on %v, want the default device %v", what, got.Device(), DefaultDevice())
	}
	if !got.IsContiguous() && got.Numel() > 0 { // ir.IsContiguous is false for a fresh [3, 0]
		t.Fatalf("%s: result is not contiguous", what)
	}
	if g, w := serBits(got), serBits(want); !bytes.Equal(g, w) {
		t.Fatalf("%s: bytes differ:\n got %v\nwant %v", what, g, w)
	}
}

var serDTypes = []DType{Float64, Float32, Float16, BFloat16, Int64, Int32, Bool}

var serShapes = [][]int{{}, {0}, {1}, {7}, {0, 3}, {3, 0}, {2, 3}, {3, 5, 7}, {2, 1, 3, 1}}

// serViews are non-contiguous views (and a 0-d element view) of dt.
func serViews(dt DType) map[string]*Tensor {
	base := serTestTensor(99, dt, 4, 6)
	return map[string]*Tensor{
		"transpose":      base.Transpose(0, 1),
		"step slice":     base.Slice(1, 1, 6, 2),
		"transpose+cut":  base.Transpose(0, 1).Slice(0, 2, 5, 1),
		"3d permute":     serTestTensor(7, dt, 2, 3, 4).Permute(2, 0, 1),
		"offset element": base.Slice(0, 2, 3, 1).Slice(1, 3, 4, 1).Reshape(),
	}
}

func npyRoundTrip(t *testing.T, x *Tensor) *Tensor {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatalf("WriteNPY(%v %v): %v", x.DType(), x.Shape(), err)
	}
	if hl := npyHeaderLen(t, buf.Bytes()); hl%64 != 0 {
		t.Fatalf("data starts at byte %d, not a multiple of 64", hl)
	}
	y, err := ReadNPY(&buf)
	if err != nil {
		t.Fatalf("ReadNPY(%v %v): %v", x.DType(), x.Shape(), err)
	}
	return y
}

// npyHeaderLen is where the data of a version 1.0 file starts.
func npyHeaderLen(t *testing.T, b []byte) int {
	t.Helper()
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 || b[7] != 0 {
		t.Fatalf("bad preamble % x", b[:min(len(b), 10)])
	}
	return 10 + int(binary.LittleEndian.Uint16(b[8:10]))
}

func TestNPYRoundTrip(t *testing.T) {
	for _, dt := range serDTypes {
		if dt == BFloat16 {
			continue // TestNPYBFloat16 covers it
		}
		for i, shape := range serShapes {
			x := serTestTensor(uint64(i), dt, shape...)
			serSameTensor(t, fmt.Sprintf("%v %v", dt, shape), npyRoundTrip(t, x), x)
		}
		for name, v := range serViews(dt) {
			if v.IsContiguous() && v.Dim() > 0 {
				t.Fatalf("view %q is contiguous", name)
			}
			serSameTensor(t, fmt.Sprintf("%v %s", dt, name), npyRoundTrip(t, v), v)
		}
	}
}

func TestNPYFloat16Specials(t *testing.T) {
	bits := []uint16{0x0000, 0x8000, 0x3c00, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x7e00, 0x7d01}
	x := newTensor(Float16, []int{len(bits)})
	copy(x.v.HostData().([]uint16), bits)
	y := npyRoundTrip(t, x)
	if got := y.cpu().v.HostData().([]uint16); !slices.Equal(got, bits) {
		t.Fatalf("float16 bits %x, want %x", got, bits)
	}
}

// BFloat16 has no numpy type: it is written as float32, exactly.
func TestNPYBFloat16(t *testing.T) {
	x := serTestTensor(3, BFloat16, 3, 4).Transpose(0, 1)
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "'descr': '<f4'") {
		t.Fatalf("bfloat16 not written as <f4: %q", buf.String()[:64])
	}
	y, err := ReadNPY(&buf)
	if err != nil {
		t.Fatal(err)
	}
	serSameTensor(t, "bfloat16 as float32", y, x.To(Float32))
}

// npyGolden is numpy.save(f, np.array([[1, 2, 3], [4, 5, 6]], dtype='<f4'))
// written out by hand from the format spec.
func npyGolden() []byte {
	var b []byte
	b = append(b, 0x93, 'N', 'U', 'M', 'P', 'Y') // magic
	b = append(b, 1, 0)                          // version 1.0
	b = append(b, 118, 0)                        // header length, little-endian: 10+118 = 128
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	b = append(b, dict...)
	for len(b) < 127 {
		b = append(b, ' ')
	}
	b = append(b, '\n')
	for _, v := range []uint32{0x3f800000, 0x40000000, 0x40400000, 0x40800000, 0x40a00000, 0x40c00000} {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) // 1 … 6 as little-endian float32
	}
	return b
}

func TestNPYGoldenRead(t *testing.T) {
	x, err := ReadNPY(bytes.NewReader(npyGolden()))
	if err != nil {
		t.Fatal(err)
	}
	if x.DType() != Float32 || !slices.Equal(x.Shape(), []int{2, 3}) {
		t.Fatalf("got %v %v, want Float32 [2 3]", x.DType(), x.Shape())
	}
	if got := x.Float32s(); !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("values %v", got)
	}
}

func TestNPYGoldenWrite(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Parse by the spec.
	if string(b[:6]) != "\x93NUMPY" {
		t.Fatalf("magic % x", b[:6])
	}
	if b[6] != 1 || b[7] != 0 {
		t.Fatalf("version %d.%d, want 1.0", b[6], b[7])
	}
	hlen := int(binary.LittleEndian.Uint16(b[8:10]))
	if (10+hlen)%64 != 0 {
		t.Fatalf("data starts at %d, not a multiple of 64", 10+hlen)
	}
	hdr := string(b[10 : 10+hlen])
	if !strings.HasSuffix(hdr, "\n") {
		t.Fatalf("header does not end in a newline: %q", hdr)
	}
	dict := strings.TrimRight(hdr, " \n")
	for _, want := range []string{"'descr': '<f4'", "'fortran_order': False", "'shape': (2, 3)"} {
		if !strings.Contains(dict, want) {
			t.Fatalf("header %q lacks %s", dict, want)
		}
	}
	if !strings.HasPrefix(dict, "{") || !strings.HasSuffix(dict, "}") {
		t.Fatalf("header %q is not a dict", dict)
	}
	data := b[10+hlen:]
	if len(data) != 24 {
		t.Fatalf("%d data bytes, want 24", len(data))
	}
	for i := range 6 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); v != float32(i+1) {
			t.Fatalf("element %d = %v", i, v)
		}
	}
	// And byte for byte what numpy writes.
	if !bytes.Equal(b, npyGolden()) {
		t.Fatalf("WriteNPY output differs from numpy's:\n got %q\nwant %q", b, npyGolden())
	}
}

// npyFile builds an .npy file with the given dict and data.
func npyFile(major byte, dict string, data []byte) []byte {
	b := append([]byte("\x93NUMPY"), major, 0)
	hdr := dict + "\n"
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	}
	return append(append(b, hdr...), data...)
}

func le32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func TestNPYFortranOrder(t *testing.T) {
	// [[1, 2, 3], [4, 5, 6]] in column-major order.
	f := npyFile(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", le32(1, 4, 2, 5, 3, 6))
	x, err := ReadNPY(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Shape(), []int{2, 3}) || !slices.Equal(x.Float32s(), []float32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("got %v %v", x.Shape(), x.Float32s())
	}
	// 3-d: element [i, j, k] = 100i + 10j + k, stored with i fastest.
	shape := []int{2, 3, 4}
	var colMajor []int64
	for k := range 4 {
		for j := range 3 {
			for i := range 2 {
				colMajor = append(colMajor, int64(100*i+10*j+k))
			}
		}
	}
	var data []byte
	for _, v := range colMajor {
		data = binary.LittleEndian.AppendUint64(data, uint64(v))
	}
	x, err = ReadNPY(bytes.NewReader(npyFile(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3, 4), }", data)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Shape(), shape) {
		t.Fatalf("shape %v", x.Shape())
	}
	got := x.Int64s()
	for i := range 2 {
		for j := range 3 {
			for k := range 4 {
				if v := got[i*12+j*4+k]; v != int64(100*i+10*j+k) {
					t.Fatalf("[%d,%d,%d] = %d", i, j, k, v)
				}
			}
		}
	}
	// 1-d and 0-d Fortran arrays are the same as C ones.
	x, err = ReadNPY(bytes.NewReader(npyFile(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", le32(7, 8, 9))))
	if err != nil || !slices.Equal(x.Float32s(), []float32{7, 8, 9}) {
		t.Fatalf("1-d fortran: %v %v", x, err)
	}
	// Empty Fortran array.
	x, err = ReadNPY(bytes.NewReader(npyFile(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }", nil)))
	if err != nil || !slices.Equal(x.Shape(), []int{0, 3}) {
		t.Fatalf("empty fortran: %v %v", x, err)
	}
}

func TestNPYBigEndianAndVariants(t *testing.T) {
	be := func(es int, vals ...uint64) []byte {
		var b []byte
		for _, v := range vals {
			for i := es - 1; i >= 0; i-- {
				b = append(b, byte(v>>(8*i)))
			}
		}
		return b
	}
	tests := []struct {
		name string
		file []byte
		dt   DType
		want []float64
	}{
		{">f4", npyFile(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
			be(4, uint64(math.Float32bits(1.5)), uint64(math.Float32bits(-2)))), Float32, []float64{1.5, -2}},
		{">f8", npyFile(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
			be(8, math.Float64bits(3.25))), Float64, []float64{3.25}},
		{">i8", npyFile(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }",
			be(8, 1<<40, uint64(1<<64-3))), Int64, []float64{1 << 40, -3}},
		{">i4", npyFile(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
			be(4, 1<<32-7)), Int32, []float64{-7}},
		{">f2", npyFile(1, "{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }",
			be(2, 0x3e00)), Float16, []float64{1.5}},
		{"fortran big-endian", npyFile(1, "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 2), }",
			be(4, 1, 3, 2, 4)), Int32, []float64{1, 2, 3, 4}},
		{"bool bytes", npyFile(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }",
			[]byte{0, 1, 2, 255}), Bool, []float64{0, 1, 1, 1}},
		{"version 2.0", npyFile(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
			le32(1, 2)), Float32, []float64{1, 2}},
		{"version 3.0", npyFile(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
			le32(5)), Float32, []float64{5}},
		{"key order, quotes, longs", npyFile(1, `{"shape": (2L,), 'fortran_order': False, 'descr': '<f4'}`,
			le32(1, 2)), Float32, []float64{1, 2}},
		{"scalar", npyFile(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
			binary.LittleEndian.AppendUint64(nil, 42)), Int64, []float64{42}},
	}
	for _, tc := range tests {
		x, err := ReadNPY(bytes.NewReader(tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if x.DType() != tc.dt {
			t.Fatalf("%s: dtype %v, want %v", tc.name, x.DType(), tc.dt)
		}
		if got := x.Float64s(); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// The bool bytes read as valid Go bools (0 or 1).
	x, _ := ReadNPY(bytes.NewReader(tests[6].file))
	for i, b := range serRawBytes(x.cpu().v.HostData()) {
		if b > 1 {
			t.Fatalf("bool %d stored as byte %d", i, b)
		}
	}
}

func TestNPYLongHeaderUsesVersion2(t *testing.T) {
	shape := make([]int, 30000)
	for i := range shape {
		shape[i] = 1
	}
	h := npyHeader("<f4", false, shape)
	if h[6] != 2 || h[7] != 0 {
		t.Fatalf("version %d.%d, want 2.0", h[6], h[7])
	}
	if hl := 12 + int(binary.LittleEndian.Uint32(h[8:12])); hl != len(h) || hl%64 != 0 {
		t.Fatalf("header length %d, len %d", hl, len(h))
	}
	info, err := parseNPYHeader(string(h[12:]))
	if err != nil || len(info.shape) != len(shape) {
		t.Fatalf("parse: %v, %d dims", err, len(info.shape))
	}
}

func TestNPYErrors(t *testing.T) {
	good := npyGolden()
	dict := func(d string) []byte {
		return npyFile(1, d, le32(1, 2, 3, 4, 5, 6))
	}
	hugeHdr := append([]byte("\x93NUMPY\x02\x00"), 0xff, 0xff, 0xff, 0x7f)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", append([]byte("\x93NUMPX"), good[6:]...), "not a .npy file"},
		{"bad version", append(append([]byte{}, good[:6]...), append([]byte{9, 0}, good[8:]...)...), "version 9.0"},
		{"truncated length", good[:9], "header length"},
		{"truncated header", good[:50], "header length 118"},
		{"truncated data", good[:len(good)-1], "truncated"},
		{"huge header length", hugeHdr, "exceeds the limit"},
		{"no dict", dict("hello"), "does not start with '{'"},
		{"no newline needed but no close", npyFile(1, "{'descr': '<f4'", nil), "expected ','"},
		{"missing shape", dict("{'descr': '<f4', 'fortran_order': False}"), `"shape" is missing`},
		{"duplicate key", dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}"), "twice"},
		{"unknown key", dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}"), "unexpected key"},
		{"bad order", dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}"), "True or False"},
		{"negative dim", dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}"), "'shape'"},
		{"float dim", dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6.0,)}"), "'shape'"},
		{"overflowing dim", dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"), "'shape'"},
		{"overflowing numel", dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"), "too large"},
		{"huge shape, little data", dict("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,)}"), "truncated"},
		{"complex", dict("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}"), `unsupported dtype "<c8"`},
		{"uint8", dict("{'descr': '|u1', 'fortran_order': False, 'shape': (24,)}"), `unsupported dtype "|u1"`},
		{"object", dict("{'descr': '|O', 'fortran_order': False, 'shape': (3,)}"), "unsupported dtype"},
		{"structured", dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}"), "structured"},
		{"no byte order for f4", dict("{'descr': '|f4', 'fortran_order': False, 'shape': (6,)}"), "no byte order"},
		{"trailing text", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", le32(1, 2, 3, 4, 5, 6)), "after the dict"},
		// npyio's reader panics on this one (it slices at the last newline).
		{"no newline, keys swapped", []byte("\x93NUMPY\x01\x00\x08\x00{'a': 1}"), "unexpected key"},
	}
	for _, tc := range tests {
		_, err := ReadNPY(bytes.NewReader(tc.file))
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %q does not mention %q", tc.name, err, tc.want)
		}
		// The same through a reader that cannot tell its length.
		if _, err := ReadNPY(onlyReader{bytes.NewReader(tc.file)}); err == nil {
			t.Fatalf("%s (stream): no error", tc.name)
		}
	}
	if err := WriteNPY(&bytes.Buffer{}, nil); err == nil {
		t.Fatal("WriteNPY(nil): no error")
	}
}

// onlyReader hides every method but Read.
type onlyReader struct {
	r interface{ Read([]byte) (int, error) }
}

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestNPYStream(t *testing.T) {
	x := serTestTensor(5, Float64, 3, 4)
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	y, err := ReadNPY(onlyReader{&buf})
	if err != nil {
		t.Fatal(err)
	}
	serSameTensor(t, "stream", y, x)
}

func TestNPYSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.npy")
	x := serTestTensor(1, Int32, 5, 3).Transpose(0, 1)
	if err := SaveNPY(path, x); err != nil {
		t.Fatal(err)
	}
	if err := SaveNPY(path, x); err != nil { // overwrite
		t.Fatal(err)
	}
	y, err := LoadNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	serSameTensor(t, "file", y, x)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only x.npy (temp file left?)", len(entries))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if err := SaveNPY(filepath.Join(dir, "no", "such", "dir.npy"), x); err == nil {
		t.Fatal("SaveNPY into a missing directory: no error")
	}
	if _, err := LoadNPY(filepath.Join(dir, "missing.npy")); err == nil {
		t.Fatal("LoadNPY of a missing file: no error")
	}
	b, _ := os.ReadFile(path)
	bad := filepath.Join(dir, "bad.npy")
	os.WriteFile(bad, b[:len(b)-3], 0o644)
	if _, err := LoadNPY(bad); err == nil || !strings.Contains(err.Error(), "bad.npy") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("LoadNPY of a truncated file: %v", err)
	}
}

// npyio is an independent implementation of the format: files it writes
// read here, and files written here read with it.
func TestNPYWithNpyio(t *testing.T) {
	if npyMagic != npyio.Magic {
		t.Fatalf("magic %q, npyio's %q", npyMagic, npyio.Magic)
	}
	var buf bytes.Buffer
	if err := npyio.Write(&buf, []float64{1.5, -2, 3}); err != nil {
		t.Fatal(err)
	}
	x, err := ReadNPY(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if x.DType() != Float64 || !slices.Equal(x.Float64s(), []float64{1.5, -2, 3}) {
		t.Fatalf("npyio []float64: %v %v", x.DType(), x.Float64s())
	}
	buf.Reset()
	if err := npyio.Write(&buf, []bool{true, false, true}); err != nil {
		t.Fatal(err)
	}
	if x, err = ReadNPY(&buf); err != nil || !slices.Equal(x.Bools(), []bool{true, false, true}) {
		t.Fatalf("npyio []bool: %v %v", x, err)
	}
	buf.Reset()
	if err := npyio.Write(&buf, mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})); err != nil {
		t.Fatal(err)
	}
	if x, err = ReadNPY(&buf); err != nil || !slices.Equal(x.Shape(), []int{2, 3}) || !slices.Equal(x.Float64s(), []float64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("npyio mat.Dense: %v %v", x, err)
	}

	check := func(x *Tensor, ptr any) {
		t.Helper()
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatal(err)
		}
		r, err := npyio.NewReader(&buf)
		if err != nil {
			t.Fatalf("npyio cannot read %v %v: %v", x.DType(), x.Shape(), err)
		}
		if !slices.Equal(r.Header.Descr.Shape, x.Shape()) && !(len(r.Header.Descr.Shape) == 0 && x.Dim() == 0) {
			t.Fatalf("npyio sees shape %v, want %v", r.Header.Descr.Shape, x.Shape())
		}
		if r.Header.Descr.Fortran {
			t.Fatal("npyio sees fortran_order True")
		}
		if err := r.Read(ptr); err != nil {
			t.Fatalf("npyio reading %v: %v", x.DType(), err)
		}
	}
	v := serTestTensor(2, Float32, 3, 4).Transpose(0, 1)
	var f32 []float32
	check(v, &f32)
	if !slices.Equal(f32, v.Float32s()) {
		t.Fatalf("npyio float32 %v, want %v", f32, v.Float32s())
	}
	var i64 []int64
	check(serTestTensor(3, Int64, 2, 2, 2), &i64)
	if !slices.Equal(i64, serTestTensor(3, Int64, 2, 2, 2).Int64s()) {
		t.Fatal("npyio int64 differs")
	}
	var i32 []int32
	check(serTestTensor(4, Int32, 5), &i32)
	var bs []bool
	check(serTestTensor(5, Bool, 9), &bs)
	if !slices.Equal(bs, serTestTensor(5, Bool, 9).Bools()) {
		t.Fatal("npyio bool differs")
	}
	var f64 []float64
	check(Scalar(2.5, Float64), &f64)
	if !slices.Equal(f64, []float64{2.5}) {
		t.Fatalf("npyio scalar %v", f64)
	}
	var m mat.Dense
	check(serTestTensor(6, Float64, 3, 2), &m)
	if r, c := m.Dims(); r != 3 || c != 2 || m.At(2, 1) != serTestTensor(6, Float64, 3, 2).At(2, 1) {
		t.Fatalf("npyio mat.Dense %d×%d", r, c)
	}
}

// serPython returns a Python that has numpy ($GOCOMPILE_PYTHON, python3 on
// the PATH or /usr/bin/python3), or skips the test.
func serPython(t *testing.T) string {
	t.Helper()
	var cands []string
	if p := os.Getenv("GOCOMPILE_PYTHON"); p != "" {
		cands = append(cands, p)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	for _, py := range cands {
		if exec.Command(py, "-c", "import numpy").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with numpy")
	return ""
}

func TestNPYNumpyInterop(t *testing.T) {
	py := serPython(t)
	dir := t.TempDir()
	// Go writes, numpy reads.
	written := map[string]*Tensor{
		"f8": serTestTensor(1, Float64, 2, 3), "f4": serTestTensor(2, Float32, 4).Reshape(2, 2).Transpose(0, 1),
		"f2": serTestTensor(3, Float16, 3), "i8": serTestTensor(4, Int64, 2, 1, 2), "i4": serTestTensor(5, Int32),
		"b1": serTestTensor(6, Bool, 5), "empty": Zeros(Float32, 0, 3),
	}
	for name, x := range written {
		if err := SaveNPY(filepath.Join(dir, name+".npy"), x); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(x.Float64s())
		script := fmt.Sprintf(`
import numpy as np, sys
a = np.load(sys.argv[1])
assert a.dtype == np.dtype(%q), a.dtype
assert list(a.shape) == %s, a.shape
print(" ".join(repr(float(v)) for v in a.astype(np.float64).ravel()))
`, map[string]string{"f8": "<f8", "f4": "<f4", "f2": "<f2", "i8": "<i8", "i4": "<i4", "b1": "|b1", "empty": "<f4"}[name],
			pyList(x.Shape()))
		out, err := exec.Command(py, "-c", script, filepath.Join(dir, name+".npy")).CombinedOutput()
		if err != nil {
			t.Fatalf("numpy reading %s: %v\n%s", name, err, out)
		}
		var got []float64
		for _, f := range strings.Fields(string(out)) {
			var v float64
			fmt.Sscan(f, &v)
			got = append(got, v)
		}
		if fmt.Sprint(got) != want && !(len(got) == 0 && x.Numel() == 0) {
			t.Fatalf("numpy read %s as %v, want %s", name, got, want)
		}
	}
	// numpy writes, Go reads.
	script := `
import numpy as np, sys, os
d = sys.argv[1]
a = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 1.5 - 7
np.save(os.path.join(d, "c.npy"), a)
np.save(os.path.join(d, "f.npy"), np.asfortranarray(a.astype(np.float32)))
np.save(os.path.join(d, "be.npy"), a.astype(">i8"))
np.save(os.path.join(d, "h.npy"), a.astype(np.float16))
np.save(os.path.join(d, "b.npy"), a > 0)
np.save(os.path.join(d, "s.npy"), np.int32(-5))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy writing: %v\n%s", err, out)
	}
	ref := Arange(0, 24, 1, Float64).Reshape(2, 3, 4).MulScalar(1.5).AddScalar(-7)
	for name, want := range map[string]*Tensor{
		"c": ref, "f": ref.To(Float32), "be": ref.To(Int64), "h": ref.To(Float16), "b": ref.GtScalar(0),
	} {
		x, err := LoadNPY(filepath.Join(dir, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		serSameTensor(t, "numpy "+name, x, want)
	}
	x, err := LoadNPY(filepath.Join(dir, "s.npy"))
	if err != nil || x.Dim() != 0 || x.DType() != Int32 || x.Item() != -5 {
		t.Fatalf("numpy scalar: %v %v", x, err)
	}
}

func pyList(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func FuzzReadNPY(f *testing.F) {
	f.Add(npyGolden())
	for _, dt := range []DType{Float64, Float32, Float16, Int64, Int32, Bool} {
		var buf bytes.Buffer
		WriteNPY(&buf, serTestTensor(1, dt, 2, 3))
		f.Add(buf.Bytes())
	}
	f.Add(npyFile(1, "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 2), }", []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4}))
	f.Add(npyFile(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le32(1)))
	f.Add(npyFile(1, "{'descr': '|b1', 'fortran_order': True, 'shape': (2, 0, 3), }", nil))
	// Malformed: truncated, lying about sizes, overflowing.
	good := npyGolden()
	f.Add(good[:len(good)-3])
	f.Add(good[:12])
	f.Add(append([]byte("\x93NUMPY\x02\x00"), 0xff, 0xff, 0xff, 0x7f))
	f.Add(npyFile(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,)}", le32(1, 2)))
	f.Add(npyFile(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (4294967296, 4294967297)}", le32(1)))
	f.Add(npyFile(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)}", le32(1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ReadNPY(bytes.NewReader(data))
		// A reader that cannot tell its length reads the same, or fails too.
		xs, errStream := ReadNPY(onlyReader{bytes.NewReader(data)})
		if (err == nil) != (errStream == nil) {
			t.Fatalf("sized reader: %v; stream: %v", err, errStream)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(serBits(x), serBits(xs)) || !slices.Equal(x.Shape(), xs.Shape()) || x.DType() != xs.DType() {
			t.Fatal("the stream read another tensor")
		}
		// What reads must write and read back the same.
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatalf("WriteNPY of a read tensor: %v", err)
		}
		y, err := ReadNPY(&buf)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !bytes.Equal(serBits(x), serBits(y)) || !slices.Equal(x.Shape(), y.Shape()) {
			t.Fatal("round trip changed the tensor")
		}
	})
}
