package guard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gocompile/ir"
)

// MaxRank is the number of dims a TensorMeta holds inline. The sizes of the
// dims of a tensor with more dims are described through TensorMeta.Overflow
// and are guarded exactly like the inline ones.
const MaxRank = 8

// TensorMeta describes one tensor input of a call: what the guards look at.
// It holds no pointers in the common case (rank <= MaxRank), so callers can
// fill a reused Call without allocating.
type TensorMeta struct {
	DType      ir.DType
	Device     ir.Device
	Rank       int
	Shape      [MaxRank]int // sizes of dims 0 .. min(Rank, MaxRank)-1
	Contiguous bool
	// Overflow holds the sizes of dims MaxRank .. Rank-1 when Rank > MaxRank
	// (Rank-MaxRank values); nil otherwise. SetShape fills it with a
	// subslice of its argument, without allocating.
	Overflow []int
}

// SetShape sets Rank, Shape and Overflow from shape. It does not allocate:
// for shapes longer than MaxRank, Overflow aliases shape[MaxRank:].
func (m *TensorMeta) SetShape(shape []int) {
	m.Rank = len(shape)
	m.Shape = [MaxRank]int{}
	copy(m.Shape[:], shape)
	m.Overflow = nil
	if len(shape) > MaxRank {
		m.Overflow = shape[MaxRank:]
	}
}

// Dim is the size of dim d (0 <= d < Rank).
func (m *TensorMeta) Dim(d int) int {
	if d < MaxRank {
		return m.Shape[d]
	}
	return m.Overflow[d-MaxRank]
}

// valid reports whether the meta's Rank and Overflow agree.
func (m *TensorMeta) valid() bool {
	if m.Rank < 0 {
		return false
	}
	if m.Rank > MaxRank {
		return len(m.Overflow) >= m.Rank-MaxRank
	}
	return true
}

// Call describes the inputs of one call of a compiled function: its tensor
// inputs and its scalar inputs, in flattened argument order. The caller
// owns and reuses the backing arrays; nothing in this package keeps a
// reference to a Call after returning (NewEntry copies what it needs).
type Call struct {
	Tensors []TensorMeta
	Scalars []float64
	// Structure describes the shape of the arguments beyond their leaves
	// (the lengths of slices, which pointers are nil): calls that differ in
	// it never share an entry, even with equal leaves.
	Structure []int
}

// Policy says which dims of tensor inputs get symbols (are dynamic).
type Policy struct {
	// Dynamic makes every dim dynamic from the first compile, as
	// torch.compile(dynamic=True).
	Dynamic bool
	// Marked holds the (tensor input, dim) pairs marked dynamic up front, as
	// torch._dynamo.mark_dynamic.
	Marked map[[2]int]bool
	// AutoDynamic enables automatic dynamic shapes: when a call misses only
	// because the sizes of some dims changed, the next entry makes those
	// dims dynamic (see Cache.Plan). The zero Policy has it off; use
	// DefaultPolicy for PyTorch's default behaviour.
	AutoDynamic bool
}

// DefaultPolicy is torch.compile's default: static shapes first, automatic
// dynamic shapes on recompile.
func DefaultPolicy() Policy { return Policy{AutoDynamic: true} }

// dimSpec is the guard on one dim: a static size (sym < 0) or a symbol.
type dimSpec struct {
	size        int  // the example size
	sym         int  // symbol id, or -1 for a static dim
	specialized bool // made static by Specialize/AddEquality: Plan keeps it static
}

// tensorSpec is the guard on one tensor input.
type tensorSpec struct {
	dtype  ir.DType
	device ir.Device
	rank   int
	contig bool
	dims   []dimSpec
}

// tensorGuard is the flat form of a tensorSpec's metadata for Check.
type tensorGuard struct {
	device ir.Device
	rank   int
	dtype  ir.DType
	contig bool
}

// The kinds of dim ops.
const (
	opEq  uint8 = iota // size == val (a static dim)
	opGE2              // size >= 2 (the first dim of a symbol)
	opRef              // size == size of dim (rt, rd) (a later dim of a symbol)
)

// dimOp is one instruction of an entry's dim program.
type dimOp struct {
	t, d   int32 // the dim read
	rt, rd int32 // opRef: the dim it must equal
	kind   uint8
	val    int // opEq: the expected size
}

// Entry is one compiled specialisation of a function: the guards that say
// which calls it serves.
//
// An Entry is built by NewEntry (or Cache.Plan), adjusted by the tracer
// with AddEquality and Specialize while it traces, and is immutable once
// inserted into a Cache: Check and Why may then be called concurrently.
type Entry struct {
	tensors   []tensorSpec
	scalars   []float64
	structure []int
	nsym      int
	symVal    []int // example value of each symbol

	// The flat guard program, rebuilt by compile.
	tg  []tensorGuard
	sb  []uint64 // scalar bits
	ops []dimOp
}

// NewEntry builds the guards for call c under policy: dtype, device, rank
// and contiguity of every tensor, every scalar by value, and every dim
// either static at its size in c or dynamic.
//
// A dim is dynamic when policy.Dynamic is set or the dim is in
// policy.Marked, unless its size is 0 or 1: those stay specialised, as in
// PyTorch. Dynamic dims with equal sizes in c share one symbol ("duck
// sizing"): the entry then requires them to stay equal. That is
// conservative — a call where they differ misses and gets its own entry,
// in which they have distinct symbols.
//
// NewEntry panics if a TensorMeta has a negative Rank or a Rank > MaxRank
// with too short an Overflow.
func NewEntry(c Call, policy Policy) *Entry {
	return newEntry(&c, policy, nil, nil)
}

// newEntry builds an entry; dims in extra are dynamic as well, dims in keep
// are static and marked specialised.
func newEntry(c *Call, policy Policy, extra, keep map[[2]int]bool) *Entry {
	e := &Entry{
		tensors:   make([]tensorSpec, len(c.Tensors)),
		scalars:   append([]float64(nil), c.Scalars...),
		structure: append([]int(nil), c.Structure...),
	}
	bySize := map[int]int{} // duck sizing: example size -> symbol
	for i := range c.Tensors {
		m := &c.Tensors[i]
		if !m.valid() {
			panic(fmt.Sprintf("guard: tensor %d: rank %d with %d overflow dims", i, m.Rank, len(m.Overflow)))
		}
		ts := tensorSpec{dtype: m.DType, device: m.Device, rank: m.Rank, contig: m.Contiguous, dims: make([]dimSpec, m.Rank)}
		for d := range ts.dims {
			n := m.Dim(d)
			k := [2]int{i, d}
			ds := dimSpec{size: n, sym: -1}
			if keep[k] {
				ds.specialized = true
			} else if n >= 2 && (policy.Dynamic || policy.Marked[k] || extra[k]) {
				s, ok := bySize[n]
				if !ok {
					s = e.nsym
					e.nsym++
					bySize[n] = s
				}
				ds.sym = s
			}
			ts.dims[d] = ds
		}
		e.tensors[i] = ts
	}
	e.compile()
	return e
}

// compile renumbers the symbols in order of first use and rebuilds the
// flat guard program.
func (e *Entry) compile() {
	renum := map[int]int{}
	e.symVal = e.symVal[:0]
	for i := range e.tensors {
		for d := range e.tensors[i].dims {
			ds := &e.tensors[i].dims[d]
			if ds.sym < 0 {
				continue
			}
			s, ok := renum[ds.sym]
			if !ok {
				s = len(renum)
				renum[ds.sym] = s
				e.symVal = append(e.symVal, ds.size)
			}
			ds.sym = s
		}
	}
	e.nsym = len(renum)

	e.tg = make([]tensorGuard, len(e.tensors))
	e.sb = make([]uint64, len(e.scalars))
	for i, v := range e.scalars {
		e.sb[i] = math.Float64bits(v)
	}
	e.ops = e.ops[:0]
	first := make([][2]int32, e.nsym)
	seen := make([]bool, e.nsym)
	for i := range e.tensors {
		ts := &e.tensors[i]
		e.tg[i] = tensorGuard{device: ts.device, rank: ts.rank, dtype: ts.dtype, contig: ts.contig}
		for d, ds := range ts.dims {
			op := dimOp{t: int32(i), d: int32(d)}
			switch {
			case ds.sym < 0:
				op.kind, op.val = opEq, ds.size
			case !seen[ds.sym]:
				seen[ds.sym] = true
				first[ds.sym] = [2]int32{int32(i), int32(d)}
				op.kind = opGE2
			default:
				op.kind = opRef
				op.rt, op.rd = first[ds.sym][0], first[ds.sym][1]
			}
			e.ops = append(e.ops, op)
		}
	}
}

// dimOf reads the size of dim d of tensor t; Check has already verified
// the tensor's rank and overflow length.
func dimOf(ts []TensorMeta, t, d int32) int {
	if d < MaxRank {
		return ts[t].Shape[d]
	}
	return ts[t].Overflow[d-MaxRank]
}

// Check reports whether every guard of e passes for c. It does not
// allocate. The guards run in this order (Why reports the first failure
// in the same order): the numbers of tensors and scalars and the
// structure; each tensor's dtype, device, rank and contiguity; the
// scalars, by bits; then one instruction per dim — static size, "symbol >= 2" at a symbol's first
// dim, "equals the symbol's first dim" at its other dims.
func (e *Entry) Check(c *Call) bool {
	ts := c.Tensors
	if len(ts) != len(e.tg) || len(c.Scalars) != len(e.sb) || !slices.Equal(c.Structure, e.structure) {
		return false
	}
	for i := range e.tg {
		g, m := &e.tg[i], &ts[i]
		if m.DType != g.dtype || m.Rank != g.rank || m.Contiguous != g.contig || m.Device != g.device {
			return false
		}
		if g.rank > MaxRank && len(m.Overflow) < g.rank-MaxRank {
			return false
		}
	}
	sc := c.Scalars[:len(e.sb)]
	for i, b := range e.sb {
		if math.Float64bits(sc[i]) != b {
			return false
		}
	}
	for i := range e.ops {
		op := &e.ops[i]
		n := dimOf(ts, op.t, op.d)
		switch op.kind {
		case opEq:
			if n != op.val {
				return false
			}
		case opGE2:
			if n < 2 {
				return false
			}
		default:
			if n != dimOf(ts, op.rt, op.rd) {
				return false
			}
		}
	}
	return true
}

// Why describes the first guard of e that fails for c, or returns "" when
// every guard passes (exactly when Check(c) is true).
func (e *Entry) Why(c *Call) string {
	ts := c.Tensors
	if len(ts) != len(e.tg) {
		return fmt.Sprintf("%d tensor inputs, expected %d", len(ts), len(e.tg))
	}
	if len(c.Scalars) != len(e.sb) {
		return fmt.Sprintf("%d scalar inputs, expected %d", len(c.Scalars), len(e.sb))
	}
	if !slices.Equal(c.Structure, e.structure) {
		return fmt.Sprintf("argument structure (slice lengths, nil pointers) %v, expected %v", c.Structure, e.structure)
	}
	for i := range e.tg {
		g, m := &e.tg[i], &ts[i]
		switch {
		case m.DType != g.dtype:
			return fmt.Sprintf("tensor %d: dtype %v, expected %v", i, m.DType, g.dtype)
		case m.Device != g.device:
			return fmt.Sprintf("tensor %d: device %v, expected %v", i, m.Device, g.device)
		case m.Rank != g.rank:
			return fmt.Sprintf("tensor %d: rank %d, expected %d", i, m.Rank, g.rank)
		case m.Contiguous != g.contig:
			return fmt.Sprintf("tensor %d: %s, expected %s", i, contigWord(m.Contiguous), contigWord(g.contig))
		case g.rank > MaxRank && len(m.Overflow) < g.rank-MaxRank:
			return fmt.Sprintf("tensor %d: rank %d but %d overflow sizes, expected %d", i, m.Rank, len(m.Overflow), g.rank-MaxRank)
		}
	}
	for i, b := range e.sb {
		if math.Float64bits(c.Scalars[i]) != b {
			return fmt.Sprintf("scalar %d: %s, expected %s", i, fmtFloat(c.Scalars[i]), fmtFloat(e.scalars[i]))
		}
	}
	for i := range e.ops {
		op := &e.ops[i]
		n := dimOf(ts, op.t, op.d)
		switch op.kind {
		case opEq:
			if n != op.val {
				return fmt.Sprintf("tensor %d dim %d: size %d, expected %d", op.t, op.d, n, op.val)
			}
		case opGE2:
			if n < 2 {
				return fmt.Sprintf("tensor %d dim %d: size %d, dynamic dims need >= 2", op.t, op.d, n)
			}
		default:
			if r := dimOf(ts, op.rt, op.rd); n != r {
				return fmt.Sprintf("tensor %d dim %d == tensor %d dim %d failed: %d vs %d", op.rt, op.rd, op.t, op.d, r, n)
			}
		}
	}
	return ""
}

func contigWord(c bool) string {
	if c {
		return "contiguous"
	}
	return "non-contiguous"
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// String lists the installed guards, one per line: a line per tensor input
// with its dtype, device, contiguity and shape (symbols for dynamic dims),
// a line "sN >= 2" per symbol, and a line per scalar. An entry without
// inputs prints as "(no guards)".
func (e *Entry) String() string {
	var b strings.Builder
	for i, ts := range e.tensors {
		fmt.Fprintf(&b, "tensor %d: %v %v %s [", i, ts.dtype, ts.device, contigWord(ts.contig))
		for d, ds := range ts.dims {
			if d > 0 {
				b.WriteString(", ")
			}
			if ds.sym >= 0 {
				fmt.Fprintf(&b, "s%d", ds.sym)
			} else {
				b.WriteString(strconv.Itoa(ds.size))
			}
		}
		b.WriteString("]\n")
	}
	for s := 0; s < e.nsym; s++ {
		fmt.Fprintf(&b, "s%d >= 2\n", s)
	}
	for i, v := range e.scalars {
		fmt.Fprintf(&b, "scalar %d == %s\n", i, fmtFloat(v))
	}
	if len(e.structure) > 0 {
		fmt.Fprintf(&b, "structure == %v\n", e.structure)
	}
	if b.Len() == 0 {
		return "(no guards)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// dim returns the spec of (t, d) or an error naming the bad index.
func (e *Entry) dim(t, d int) (*dimSpec, error) {
	if t < 0 || t >= len(e.tensors) {
		return nil, fmt.Errorf("guard: tensor %d out of range (%d tensor inputs)", t, len(e.tensors))
	}
	if d < 0 || d >= len(e.tensors[t].dims) {
		return nil, fmt.Errorf("guard: tensor %d dim %d out of range (rank %d)", t, d, len(e.tensors[t].dims))
	}
	return &e.tensors[t].dims[d], nil
}

// Symbol returns the symbol id of dim d of tensor input t, and whether the
// dim is dynamic (false and -1 for a static dim or a bad index).
func (e *Entry) Symbol(t, d int) (sym int, dynamic bool) {
	ds, err := e.dim(t, d)
	if err != nil || ds.sym < 0 {
		return -1, false
	}
	return ds.sym, true
}

// NumSymbols is the number of distinct symbols (s0 .. sN-1) of e.
func (e *Entry) NumSymbols() int { return e.nsym }

// SymbolValue is the example size of symbol s: its size in the call the
// entry was built for.
func (e *Entry) SymbolValue(s int) int { return e.symVal[s] }

// DynamicDims lists the (tensor input, dim) pairs of e that are dynamic,
// in order.
func (e *Entry) DynamicDims() [][2]int {
	var out [][2]int
	for i, ts := range e.tensors {
		for d, ds := range ts.dims {
			if ds.sym >= 0 {
				out = append(out, [2]int{i, d})
			}
		}
	}
	return out
}

// Specialize makes dim d of tensor input t static at its example size: the
// tracer calls it when user code reads the size of a dynamic dim as a Go
// int. Since every dim sharing the dim's symbol equals it, the whole symbol
// is specialised (all its dims become static). Specialised dims stay static
// under automatic dynamic shapes in later entries (the trace would
// specialise them again). Specialising a static dim only records that.
// Call it before the entry is inserted into a Cache.
func (e *Entry) Specialize(t, d int) error {
	ds, err := e.dim(t, d)
	if err != nil {
		return err
	}
	if ds.sym < 0 {
		ds.specialized = true
		return nil
	}
	e.specializeSym(ds.sym)
	e.compile()
	return nil
}

func (e *Entry) specializeSym(s int) {
	for i := range e.tensors {
		for d := range e.tensors[i].dims {
			if ds := &e.tensors[i].dims[d]; ds.sym == s {
				ds.sym, ds.specialized = -1, true
			}
		}
	}
}

// AddEquality adds the guard "dim d of tensor t == dim d2 of tensor t2":
// the tracer calls it when user code relied on two sizes being equal. Both
// sizes must be equal in the entry's example call. With both dims dynamic
// their symbols are merged; with one static, the other's symbol is
// specialised to that size; with both static the guard is implied already.
// Call it before the entry is inserted into a Cache.
func (e *Entry) AddEquality(t, d, t2, d2 int) error {
	a, err := e.dim(t, d)
	if err != nil {
		return err
	}
	b, err := e.dim(t2, d2)
	if err != nil {
		return err
	}
	if a.size != b.size {
		return fmt.Errorf("guard: tensor %d dim %d == tensor %d dim %d does not hold for the example call: %d vs %d", t, d, t2, d2, a.size, b.size)
	}
	switch {
	case a.sym < 0 && b.sym < 0, a.sym == b.sym:
		return nil
	case a.sym < 0:
		e.specializeSym(b.sym)
	case b.sym < 0:
		e.specializeSym(a.sym)
	default:
		from, to := max(a.sym, b.sym), min(a.sym, b.sym)
		for i := range e.tensors {
			for k := range e.tensors[i].dims {
				if ds := &e.tensors[i].dims[k]; ds.sym == from {
					ds.sym = to
				}
			}
		}
	}
	e.compile()
	return nil
}

// sameKind reports whether c differs from e at most in the sizes of dims:
// the same numbers of inputs, structure, dtypes, devices, ranks,
// contiguity and scalar values.
func (e *Entry) sameKind(c *Call) bool {
	if len(c.Tensors) != len(e.tensors) || len(c.Scalars) != len(e.sb) || !slices.Equal(c.Structure, e.structure) {
		return false
	}
	for i := range e.tg {
		g, m := &e.tg[i], &c.Tensors[i]
		if m.DType != g.dtype || m.Rank != g.rank || m.Contiguous != g.contig || m.Device != g.device || !m.valid() {
			return false
		}
	}
	for i, b := range e.sb {
		if math.Float64bits(c.Scalars[i]) != b {
			return false
		}
	}
	return true
}

// formatDims writes dims as "tensor 0 dim 0, tensor 1 dim 0".
func formatDims(dims [][2]int) string {
	parts := make([]string, len(dims))
	for i, k := range dims {
		parts[i] = fmt.Sprintf("tensor %d dim %d", k[0], k[1])
	}
	return strings.Join(parts, ", ")
}
