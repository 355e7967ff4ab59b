package tensor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"gocompile/array"
	"gocompile/ir"
)

// The safetensors format (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON
//
//	{"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, …}
//
// and the tensors' bytes, little-endian and row-major, at the offsets
// (relative to the end of the header). Element types:
//
//	safetensors   tensor DType
//	F64           Float64
//	F32           Float32
//	F16           Float16
//	BF16          BFloat16
//	I64           Int64
//	I32           Int32
//	BOOL          Bool
//
// Others (I8, U8, I16, F8_E4M3 …) are rejected with an error naming the
// tensor and the dtype.

// stMaxHeader bounds the JSON header, as the reference implementation does.
const stMaxHeader = 100_000_000

// stMetadataKey is the header entry that holds the string metadata.
const stMetadataKey = "__metadata__"

var stDTypes = map[string]DType{
	"F64": Float64, "F32": Float32, "F16": Float16, "BF16": BFloat16,
	"I64": Int64, "I32": Int32, "BOOL": Bool,
}

func stName(dt DType) string {
	for k, v := range stDTypes {
		if v == dt {
			return k
		}
	}
	return ""
}

// stEntry is one tensor's header entry.
type stEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// LoadSafetensors reads the safetensors file at path: its tensors, on the
// default device, and its metadata (empty if it has none).
func LoadSafetensors(path string) (map[string]*Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	ts, md, err := readSafetensors(bufio.NewReaderSize(f, 1<<16), serRemaining(f))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, md, nil
}

// ReadSafetensors reads a safetensors file from r: its tensors, on the
// default device, and its metadata (empty if it has none). The header is
// checked before any data is read: its length, each entry's dtype, shape
// and offsets (within the data, matching dtype × shape, not overlapping).
// Unused gaps between tensors are allowed and skipped.
func ReadSafetensors(r io.Reader) (map[string]*Tensor, map[string]string, error) {
	if r == nil {
		return nil, nil, errors.New("safetensors: nil reader")
	}
	return readSafetensors(r, serRemaining(r))
}

type stItem struct {
	name       string
	dt         DType
	shape      []int
	begin, end int64
}

func readSafetensors(r io.Reader, avail int64) (map[string]*Tensor, map[string]string, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, nil, fmt.Errorf("safetensors: reading the header length: %w", serNoEOF(err))
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n < 2 || n > stMaxHeader {
		return nil, nil, fmt.Errorf("safetensors: header length %d is out of range [2, %d]", n, stMaxHeader)
	}
	if avail >= 0 && int64(n) > avail-8 {
		return nil, nil, fmt.Errorf("safetensors: header length %d but only %d bytes follow", n, max(avail-8, 0))
	}
	hdr, err := serReadBytes(r, int64(n), avail >= 0)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: reading the %d-byte header: %w", n, serNoEOF(err))
	}
	items, md, err := parseSTHeader(hdr)
	if err != nil {
		return nil, nil, err
	}
	if avail >= 0 {
		avail -= 8 + int64(n)
		if len(items) > 0 {
			if end := items[len(items)-1].end; end > avail {
				it := items[len(items)-1]
				return nil, nil, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] extend past the %d bytes of data (truncated file?)",
					it.name, it.begin, it.end, avail)
			}
		}
	}
	ts := make(map[string]*Tensor, len(items))
	var pos int64
	for _, it := range items {
		if it.begin > pos {
			if _, err := io.CopyN(io.Discard, r, it.begin-pos); err != nil {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: skipping to offset %d: %w", it.name, it.begin, serNoEOF(err))
			}
			if avail >= 0 {
				avail -= it.begin - pos
			}
		}
		numel := int((it.end - it.begin) / int64(it.dt.Size()))
		data, err := serReadElements(r, it.dt, numel, false, avail)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q (%s %v): %w", it.name, stName(it.dt), it.shape, err)
		}
		if avail >= 0 {
			avail -= it.end - it.begin
		}
		pos = it.end
		t, err := serToDefault(wrap(array.FromData(data, it.dt, it.shape)))
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", it.name, err)
		}
		ts[it.name] = t
	}
	return ts, md, nil
}

// parseSTHeader checks the JSON header and returns its entries sorted by
// offset, and the metadata.
func parseSTHeader(hdr []byte) ([]stItem, map[string]string, error) {
	if trimmed := bytes.TrimLeft(hdr, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil, errors.New("safetensors: the header is not a JSON object")
	}
	raw, err := stFields(hdr)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: bad JSON header: %w", err)
	}
	md := map[string]string{}
	if m, ok := raw[stMetadataKey]; ok {
		if !bytes.Equal(bytes.TrimSpace(m), []byte("null")) {
			if err := json.Unmarshal(m, &md); err != nil {
				return nil, nil, fmt.Errorf("safetensors: %s is not an object of strings: %w", stMetadataKey, err)
			}
		}
		delete(raw, stMetadataKey)
	}
	items := make([]stItem, 0, len(raw))
	for name, m := range raw {
		var e stEntry
		if err := json.Unmarshal(m, &e); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: bad header entry: %w", name, err)
		}
		dt, ok := stDTypes[e.DType]
		if !ok {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: unsupported dtype %q (supported: BOOL, BF16, F16, F32, F64, I32, I64)", name, e.DType)
		}
		if e.Shape == nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: missing shape", name)
		}
		if len(e.DataOffsets) != 2 {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end], got %v", name, e.DataOffsets)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: invalid data_offsets [%d, %d]", name, begin, end)
		}
		numel, ok := serNumel(e.Shape)
		if !ok {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: invalid or too large shape %s (at most %d dims, %d elements)",
				name, npyTruncate(fmt.Sprint(e.Shape)), serMaxRank, ir.MaxNumel)
		}
		if want := int64(numel) * int64(dt.Size()); end-begin != want {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] hold %d bytes but %s %v needs %d",
				name, begin, end, end-begin, e.DType, e.Shape, want)
		}
		items = append(items, stItem{name: name, dt: dt, shape: e.Shape, begin: begin, end: end})
	}
	slices.SortFunc(items, func(a, b stItem) int {
		if c := cmpInt64(a.begin, b.begin); c != 0 {
			return c
		}
		if c := cmpInt64(a.end, b.end); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for i := 1; i < len(items); i++ {
		if p, c := items[i-1], items[i]; c.begin < p.end {
			return nil, nil, fmt.Errorf("safetensors: tensors %q [%d, %d] and %q [%d, %d] overlap",
				p.name, p.begin, p.end, c.name, c.begin, c.end)
		}
	}
	return items, md, nil
}

// stFields decodes the header's top-level object, refusing a name that
// appears twice (json.Unmarshal would keep the last entry silently, and
// two readers of the file could disagree on which tensor it holds).
func stFields(hdr []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // the '{', checked by the caller
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("expected a name, got %v", t)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := fields[name]; dup {
			return nil, fmt.Errorf("%q appears twice", name)
		}
		fields[name] = v
	}
	if _, err := dec.Token(); err != nil { // the '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the object")
	}
	return fields, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SaveSafetensors writes tensors and metadata (which may be nil) to the
// safetensors file at path, atomically: the file is written under a
// temporary name in the same directory and renamed.
func SaveSafetensors(path string, tensors map[string]*Tensor, metadata map[string]string) error {
	return serSaveAtomic(path, func(w io.Writer) error { return WriteSafetensors(w, tensors, metadata) })
}

// WriteSafetensors writes tensors and metadata (which may be nil) to w in
// safetensors format. Tensors are stored sorted by name, so the same input
// always gives the same bytes; the header is padded with spaces to a
// multiple of 8 bytes, as the reference implementation does. Tensors on a
// GPU are copied to the host first.
func WriteSafetensors(w io.Writer, tensors map[string]*Tensor, metadata map[string]string) error {
	if w == nil {
		return errors.New("safetensors: nil writer")
	}
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == stMetadataKey {
			return fmt.Errorf("safetensors: %q cannot name a tensor", name)
		}
		if err := serCheckWrite(w, t); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if !utf8.ValidString(name) {
			return fmt.Errorf("safetensors: tensor name %q is not valid UTF-8", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: metadata %q: %q is not valid UTF-8", k, v)
		}
	}
	cpu := make([]*array.Array, len(names))
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	if metadata != nil {
		hdr.WriteString(`"` + stMetadataKey + `":`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		hdr.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			stWriteString(&hdr, k)
			hdr.WriteByte(':')
			stWriteString(&hdr, metadata[k])
		}
		hdr.WriteByte('}')
	}
	var off int64
	for i, name := range names {
		t := tensors[name]
		if t.px != nil {
			t = t.materialize("WriteSafetensors")
		}
		a := t.cpu().v
		cpu[i] = a
		dn := stName(a.DType())
		if dn == "" {
			return fmt.Errorf("safetensors: tensor %q: dtype %v has no safetensors equivalent", name, a.DType())
		}
		size := int64(a.Numel()) * int64(a.DType().Size())
		if metadata != nil || i > 0 {
			hdr.WriteByte(',')
		}
		stWriteString(&hdr, name)
		shape, _ := json.Marshal(append([]int{}, a.Shape()...))
		fmt.Fprintf(&hdr, `:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, dn, shape, off, off+size)
		off += size
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(hdr.Len()))
	if _, err := w.Write(pre[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	for i, t := range cpu {
		if _, err := w.Write(serContiguousLE(t)); err != nil {
			return fmt.Errorf("safetensors: writing tensor %q: %w", names[i], err)
		}
	}
	return nil
}

// stWriteString writes s as a JSON string, without HTML escaping.
func stWriteString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // cannot fail for a string
	b.Truncate(b.Len() - 1) // Encode's newline
}
