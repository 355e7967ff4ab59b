package tensor

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"gocompile/array"
	"gocompile/ir"
)

// NumPy .npy files (https://numpy.org/devdocs/reference/generated/numpy.lib.format.html).
//
// Element types:
//
//	numpy descr          tensor DType
//	<f8                  Float64
//	<f4                  Float32
//	<f2                  Float16 (IEEE half: the same bits)
//	<i8                  Int64
//	<i4                  Int32
//	|b1                  Bool
//	(none)               BFloat16: written as <f4 (every bfloat16 value is
//	                     exactly a float32), so it reads back as Float32
//
// Reading also accepts big-endian (">f4" …) and native ("=f4", taken as
// little-endian) descrs, converting the bytes, and Fortran-order arrays,
// transposed to row-major. Other numpy types (int8, uint8, complex,
// strings, objects, structured dtypes …) are rejected with an error that
// names the descr.
//
// The header is parsed and written here, not by github.com/sbinet/npyio:
// its reader panics on malformed headers (no newline, keys out of order),
// trusts the header length of untrusted input and has no float16, and its
// writer only writes 1-d arrays with a header that is not padded to 64
// bytes. Only the tests use npyio, as an independent implementation to
// check files against: importing it for its magic number would link its
// npz, gonum/mat and LAPACK dependencies into every program.

// npyMagic starts every .npy file.
var npyMagic = [6]byte{0x93, 'N', 'U', 'M', 'P', 'Y'}

// npyMaxHeader bounds the header of a file we read; NumPy itself refuses
// headers over 10000 bytes unless told otherwise.
const npyMaxHeader = 1 << 20

// npyAlign is what NumPy pads the header to, so that the data is aligned.
const npyAlign = 64

// ReadNPY reads one array in NumPy .npy format from r and returns it as a
// tensor on the default device.
func ReadNPY(r io.Reader) (*Tensor, error) {
	if r == nil {
		return nil, errors.New("npy: nil reader")
	}
	return readNPY(r, serRemaining(r))
}

// LoadNPY reads the .npy file at path.
func LoadNPY(path string) (*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := readNPY(bufio.NewReaderSize(f, 1<<16), serRemaining(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// WriteNPY writes t to w in NumPy .npy format, version 1.0 (2.0 if the
// header does not fit in 64 KiB), C order, little-endian. A tensor on a GPU
// is copied to the host first. BFloat16, which NumPy lacks, is written as
// float32.
func WriteNPY(w io.Writer, t *Tensor) error {
	if err := serCheckWrite(w, t); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if t.px != nil {
		t = t.materialize("WriteNPY")
	}
	a := t.cpu().v
	descr, ok := npyDescrOf(a.DType())
	if !ok {
		return fmt.Errorf("npy: dtype %v has no numpy equivalent", a.DType())
	}
	hdr := npyHeader(descr, false, a.Shape())
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	data := serContiguousLE(a)
	if a.DType() == BFloat16 {
		data = serBF16ToF32(data)
	}
	_, err := w.Write(data)
	return err
}

// SaveNPY writes t to the .npy file at path, atomically: the file is
// written under a temporary name in the same directory and renamed.
func SaveNPY(path string, t *Tensor) error {
	return serSaveAtomic(path, func(w io.Writer) error { return WriteNPY(w, t) })
}

// npyDescrOf is the descr WriteNPY writes for dt.
func npyDescrOf(dt DType) (string, bool) {
	switch dt {
	case Float64:
		return "<f8", true
	case Float32, BFloat16:
		return "<f4", true
	case Float16:
		return "<f2", true
	case Int64:
		return "<i8", true
	case Int32:
		return "<i4", true
	case Bool:
		return "|b1", true
	}
	return "", false
}

// npyHeader is the magic, version, header length and header dict, padded
// with spaces and ended by a newline so that the data starts at a multiple
// of 64 bytes, exactly as numpy.save writes it.
func npyHeader(descr string, fortran bool, shape []int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, npyPyBool(fortran), npyShapeRepr(shape))
	dict := b.String()
	padded := func(prefix int) int {
		n := prefix + len(dict) + 1 // the dict and its newline
		return n + (npyAlign-n%npyAlign)%npyAlign
	}
	major, prefix := byte(1), 10 // magic(6) version(2) length(2)
	if padded(prefix)-prefix > math.MaxUint16 {
		major, prefix = 2, 12 // length(4)
	}
	total := padded(prefix)
	hlen := total - prefix
	out := make([]byte, 0, total)
	out = append(out, npyMagic[:]...)
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hlen))
	}
	out = append(out, dict...)
	for len(out) < total-1 {
		out = append(out, ' ')
	}
	return append(out, '\n')
}

func npyPyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// npyShapeRepr formats a shape as Python's repr of a tuple: (), (3,),
// (2, 3).
func npyShapeRepr(shape []int) string {
	switch len(shape) {
	case 0:
		return "()"
	case 1:
		return "(" + strconv.Itoa(shape[0]) + ",)"
	}
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = strconv.Itoa(d)
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// npyType is a parsed descr.
type npyType struct {
	dt        DType
	bigEndian bool
}

// parseNPYDescr maps a numpy type string to a DType.
func parseNPYDescr(descr string) (npyType, error) {
	if descr == "" {
		return npyType{}, errors.New("npy: empty descr")
	}
	order, code := descr[0], descr[1:]
	switch order {
	case '<', '>', '|', '=':
	default:
		order, code = '=', descr
	}
	var dt DType
	switch code {
	case "f8":
		dt = Float64
	case "f4":
		dt = Float32
	case "f2":
		dt = Float16
	case "i8":
		dt = Int64
	case "i4":
		dt = Int32
	case "b1", "?":
		dt = Bool
	default:
		return npyType{}, fmt.Errorf("npy: unsupported dtype %q (supported: <f8 <f4 <f2 <i8 <i4 |b1, either byte order)", descr)
	}
	if order == '|' && dt.Size() > 1 {
		return npyType{}, fmt.Errorf("npy: dtype %q has no byte order but is %d bytes wide", descr, dt.Size())
	}
	return npyType{dt: dt, bigEndian: order == '>'}, nil
}

// npyHeaderInfo is the content of a header dict.
type npyHeaderInfo struct {
	descr   string
	fortran bool
	shape   []int
}

func readNPY(r io.Reader, avail int64) (*Tensor, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading the magic: %w", serNoEOF(err))
	}
	if [6]byte(pre[:6]) != npyMagic {
		return nil, fmt.Errorf("npy: not a .npy file (magic %q, want \"\\x93NUMPY\")", pre[:6])
	}
	major, minor := pre[6], pre[7]
	var hlen int
	consumed := int64(8)
	switch major {
	case 1:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %w", serNoEOF(err))
		}
		hlen, consumed = int(binary.LittleEndian.Uint16(l[:])), consumed+2
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %w", serNoEOF(err))
		}
		hlen, consumed = int(binary.LittleEndian.Uint32(l[:])), consumed+4
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > npyMaxHeader {
		return nil, fmt.Errorf("npy: header length %d exceeds the limit of %d bytes", hlen, npyMaxHeader)
	}
	if avail >= 0 && int64(hlen) > avail-consumed {
		return nil, fmt.Errorf("npy: header length %d but only %d bytes follow", hlen, max(avail-consumed, 0))
	}
	hbuf := make([]byte, hlen)
	if _, err := io.ReadFull(r, hbuf); err != nil {
		return nil, fmt.Errorf("npy: reading the %d-byte header: %w", hlen, serNoEOF(err))
	}
	consumed += int64(hlen)
	h, err := parseNPYHeader(string(hbuf))
	if err != nil {
		return nil, err
	}
	nt, err := parseNPYDescr(h.descr)
	if err != nil {
		return nil, err
	}
	n, ok := serNumel(h.shape)
	if !ok {
		return nil, fmt.Errorf("npy: shape %s of %s is too large (at most %d dims, %d elements)",
			npyTruncate(fmt.Sprint(h.shape)), h.descr, serMaxRank, ir.MaxNumel)
	}
	if avail >= 0 {
		avail -= consumed
	}
	data, err := serReadElements(r, nt.dt, n, nt.bigEndian, avail)
	if err != nil {
		return nil, fmt.Errorf("npy: reading the data of a %s array of shape %v: %w", h.descr, h.shape, err)
	}
	a := array.FromData(data, nt.dt, h.shape)
	if h.fortran && len(h.shape) > 1 {
		a = npyFortranToC(a)
	}
	return serToDefault(wrap(a))
}

// npyFortranToC reorders the elements of t, read in column-major order, into
// row-major order.
func npyFortranToC(t *array.Array) *array.Array {
	strides := make([]int, len(t.Shape()))
	s := 1
	for i, d := range t.Shape() {
		strides[i] = s
		s *= max(d, 1)
	}
	out := array.New(CPU, t.DType(), t.Shape())
	serGather(serRawBytes(out.HostData()), serRawBytes(t.HostData()), t.DType().Size(), t.Shape(), strides, 0)
	return out
}

// parseNPYHeader parses the header dict, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } followed by
// spaces and a newline.
func parseNPYHeader(s string) (npyHeaderInfo, error) {
	p := &npyParser{s: s}
	var h npyHeaderInfo
	seen := map[string]bool{}
	fail := func(format string, args ...any) (npyHeaderInfo, error) {
		return npyHeaderInfo{}, fmt.Errorf("npy: bad header %q: %s", npyTruncate(s), fmt.Sprintf(format, args...))
	}
	p.space()
	if !p.eat('{') {
		return fail("it does not start with '{'")
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, ok := p.str()
		if !ok {
			return fail("expected a quoted key at offset %d", p.i)
		}
		p.space()
		if !p.eat(':') {
			return fail("expected ':' after key %q", key)
		}
		p.space()
		if seen[key] {
			return fail("key %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "descr":
			v, ok := p.str()
			if !ok {
				return fail("'descr' is not a simple type string (structured dtypes are not supported)")
			}
			h.descr = v
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
				h.fortran = false
			default:
				return fail("'fortran_order' is not True or False")
			}
		case "shape":
			shape, ok := p.tuple()
			if !ok {
				return fail("'shape' is not a tuple of non-negative integers")
			}
			h.shape = shape
		default:
			return fail("unexpected key %q", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return fail("expected ',' or '}' at offset %d", p.i)
		}
		break
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return fail("key %q is missing", k)
		}
	}
	p.space()
	if p.i != len(p.s) {
		return fail("unexpected text after the dict at offset %d", p.i)
	}
	return h, nil
}

func npyTruncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// npyParser reads the small subset of Python literals an .npy header uses.
type npyParser struct {
	s string
	i int
}

func (p *npyParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *npyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *npyParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes.
func (p *npyParser) str() (string, bool) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsAny(v, "\\\n") {
		return "", false
	}
	p.i += end + 2
	return v, true
}

// tuple reads a tuple of non-negative integers: (), (3,), (2, 3), (2L, 3L).
func (p *npyParser) tuple() ([]int, bool) {
	if !p.eat('(') {
		return nil, false
	}
	shape := []int{}
	for {
		p.space()
		if p.eat(')') {
			return shape, true
		}
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if j == p.i {
			return nil, false
		}
		d, err := strconv.Atoi(p.s[j:p.i])
		if err != nil {
			return nil, false
		}
		p.eat('L') // Python 2 longs
		shape = append(shape, d)
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if p.eat(')') {
			return shape, true
		}
		return nil, false
	}
}

// --- helpers shared with safetensors.go ---

// serMaxRank bounds the number of dims of a tensor read from a file, as
// NumPy's NPY_MAXDIMS does: a header of a few bytes per dim could
// otherwise declare millions of them.
const serMaxRank = 64

// serCheckWrite reports why t cannot be written to w, if it cannot.
func serCheckWrite(w io.Writer, t *Tensor) error {
	switch {
	case w == nil:
		return errors.New("nil writer")
	case t == nil:
		return errors.New("cannot write a nil tensor")
	case t.v == nil:
		return errors.New("cannot write a zero Tensor{}: it has no storage")
	}
	return nil
}

// serNumel is the number of elements of shape, or false if it has too
// many dims, a negative size or more elements than a tensor may hold
// (ir.MaxNumel, whose size in bytes fits in an int).
func serNumel(shape []int) (int, bool) {
	if len(shape) > serMaxRank {
		return 0, false
	}
	return ir.CheckedNumel(shape)
}

// serRemaining is how many bytes r can still deliver, or -1 if it cannot
// tell: for files, bytes.Reader, strings.Reader and bytes.Buffer.
func serRemaining(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Len() int }:
		return int64(r.Len())
	case *os.File:
		fi, err := r.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		pos, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		return fi.Size() - pos
	}
	return -1
}

// serNoEOF turns a bare EOF into ErrUnexpectedEOF: in the middle of a file it
// means truncation.
func serNoEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// serBigAlloc is the size above which a read from a stream of unknown length
// grows its buffer with the data actually read, so that a lying header
// cannot make us allocate much more than the input holds.
const serBigAlloc = 64 << 20

// serReadElements reads n elements of dt, stored little-endian (big-endian if
// bigEndian), and returns them as storage. avail is how many bytes the
// reader holds, or -1 if unknown.
func serReadElements(r io.Reader, dt DType, n int, bigEndian bool, avail int64) (any, error) {
	es := dt.Size()
	nbytes := int64(n) * int64(es)
	if avail >= 0 && nbytes > avail {
		return nil, fmt.Errorf("need %d bytes of data but only %d remain (truncated file?)", nbytes, avail)
	}
	if err := array.AllocError("read", dt, []int{n}); err != nil { // allocData would panic
		return nil, err
	}
	var data any
	if avail < 0 && nbytes > serBigAlloc {
		buf, err := io.ReadAll(io.LimitReader(r, nbytes))
		if err != nil {
			return nil, err
		}
		if int64(len(buf)) != nbytes {
			return nil, fmt.Errorf("need %d bytes of data but only %d remain (truncated file?)", nbytes, len(buf))
		}
		data = array.New(CPU, dt, []int{n}).HostData()
		copy(serRawBytes(data), buf)
	} else {
		data = array.New(CPU, dt, []int{n}).HostData()
		if got, err := io.ReadFull(r, serRawBytes(data)); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, fmt.Errorf("need %d bytes of data but only %d remain (truncated file?)", nbytes, got)
			}
			return nil, err
		}
	}
	raw := serRawBytes(data)
	if es > 1 && bigEndian == serHostLE {
		serSwapBytes(raw, es)
	}
	if dt == Bool { // any non-zero byte is true; Go's bools must be 0 or 1
		for i, b := range raw {
			if b > 1 {
				raw[i] = 1
			}
		}
	}
	return data, nil
}

// serReadBytes reads exactly n bytes. Unless the reader is known to hold
// them (checked), a large n is not allocated up front: the buffer grows
// with the data that actually arrives, so a header that lies costs
// memory in proportion to the input.
func serReadBytes(r io.Reader, n int64, checked bool) ([]byte, error) {
	if checked || n <= 1<<20 {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf, err := io.ReadAll(io.LimitReader(r, n))
	if err == nil && int64(len(buf)) != n {
		err = io.ErrUnexpectedEOF
	}
	return buf, err
}

// serToDefault moves a freshly read CPU tensor to the default device,
// returning an error instead of panicking if that device is unusable.
func serToDefault(t *Tensor) (out *Tensor, err error) {
	err = Try(func() { out = onDefault(t) })
	return out, err
}

var serHostLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// serRawBytes views a storage slice as its bytes in host order.
func serRawBytes(data any) []byte {
	switch d := data.(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*4)
	case []float64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*8)
	case []uint16:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*2)
	case []int32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*4)
	case []int64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*8)
	case []bool:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d))
	}
	return nil
}

func serSwapBytes(b []byte, es int) {
	for i := 0; i+es <= len(b); i += es {
		for j, k := i, i+es-1; j < k; j, k = j+1, k-1 {
			b[j], b[k] = b[k], b[j]
		}
	}
}

// serContiguousLE returns the elements of the CPU tensor t in row-major order
// as little-endian bytes: a view of its storage when that is already so,
// else a copy. The bits are copied exactly (NaN payloads included).
func serContiguousLE(t *array.Array) []byte {
	es := t.DType().Size()
	n := t.Numel()
	src := serRawBytes(t.HostData())
	var out []byte
	if t.IsContiguous() {
		out = src[t.Offset()*es : (t.Offset()+n)*es]
		if serHostLE {
			return out
		}
		out = append([]byte(nil), out...)
	} else {
		out = make([]byte, n*es)
		serGather(out, src, es, t.Shape(), t.Strides(), t.Offset())
	}
	if !serHostLE && es > 1 {
		serSwapBytes(out, es)
	}
	return out
}

// serGather copies the elements of the strided view (shape, strides,
// offset, in elements of es bytes) of src into dst in row-major order.
func serGather(dst, src []byte, es int, shape, strides []int, offset int) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n == 0 {
		return
	}
	if len(shape) == 0 {
		copy(dst, src[offset*es:(offset+1)*es])
		return
	}
	last := len(shape) - 1
	inner, ist := shape[last], strides[last]
	idx := make([]int, last)
	pos := offset
	for o := 0; o < n; o += inner {
		p := pos
		for j := range inner {
			copy(dst[(o+j)*es:(o+j+1)*es], src[p*es:(p+1)*es])
			p += ist
		}
		for d := last - 1; d >= 0; d-- {
			idx[d]++
			pos += strides[d]
			if idx[d] < shape[d] {
				break
			}
			pos -= strides[d] * shape[d]
			idx[d] = 0
		}
	}
}

// serBF16ToF32 widens little-endian bfloat16 bytes to float32 bytes.
func serBF16ToF32(b []byte) []byte {
	out := make([]byte, len(b)*2)
	for i := 0; i+1 < len(b); i += 2 {
		binary.LittleEndian.PutUint32(out[i*2:], uint32(binary.LittleEndian.Uint16(b[i:]))<<16)
	}
	return out
}

// serSaveAtomic writes a file through write under a temporary name in the
// directory of path, syncs it and renames it to path.
func serSaveAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
