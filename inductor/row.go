package inductor

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gocompile/fuse"
	"gocompile/ir"
)

// RowAccess says how a row kernel reads an input along a row.
type RowAccess uint8

const (
	// RowContig inputs hold a row's elements next to each other (inner
	// stride 1): the kernel loads them with vector loads when it can.
	RowContig RowAccess = iota
	// RowUniform inputs hold one value per row (inner stride 0).
	RowUniform
	// RowStrided inputs step by their inner stride along a row.
	RowStrided
)

// RowInput is one tensor a row kernel reads.
type RowInput struct {
	DType  ir.DType
	Kind   ir.Kind // kind it is loaded in
	Access RowAccess
}

// RowStage is one row-level value of a row kernel (see fuse.Stage).
type RowStage struct {
	Name    string // the graph node, for comments
	Reduce  bool
	Reducer ir.Reducer
	Expr    *ir.Expr
	Compute ir.Kind
	Kind    ir.Kind
	DType   ir.DType // the value is rounded to it, as a store would
}

// RowKernel is a fused row region: per row of R elements, the stages in
// order (reductions over the row, and values computed once per row from
// them), then the root: Expr per element when it is set, else the last
// stage's value, one per row. Expressions read Arg(i) as input i's element
// (or its row's value, for RowUniform inputs) for i < len(Inputs), and
// Arg(len(Inputs)+k) as stage k's value.
//
// A group of Threads threads handles a row at a time; a block holds Groups
// such groups (short rows: several rows per warp or block, Threads < 32).
// A persistent kernel (Persist > 0) loads each thread's Persist×Vec
// elements of every input into registers once and runs every stage over
// them; a stashed one (Stash) copies the row's inputs that reductions read
// into shared memory once and runs every stage from there (long rows that
// fit: see StashBytes); a looped one reads the row again for each stage
// (it then comes from L2). A stashed kernel may split each row across a
// thread block cluster of Cluster blocks (sm_90), each stashing its
// share of the row and combining its reductions with the others' through
// distributed shared memory: rows too long for one block's shared memory,
// or too few rows to fill the device.
type RowKernel struct {
	Label   string
	Doc     string // the graph nodes the kernel computes, for the header
	Inputs  []RowInput
	Stages  []RowStage
	Expr    *ir.Expr
	Compute ir.Kind
	Out     ir.DType
	Threads int
	// Groups is how many rows a block handles at once, Threads threads
	// each (0 means 1); Threads*Groups is the block size, a multiple of 32
	// up to 1024, and Threads is at most 32 when Groups > 1.
	Groups int
	Vec    int // 2, 4 or 8: contiguous inputs and the output use vector accesses of Vec elements, at most 16 bytes (R % Vec == 0, aligned rows, unless Shifted)
	// Shifted lets rows of any length and alignment use vector accesses:
	// each row's columns are walked in chunks of Vec that start head
	// elements before the row, head being how far the row's first element
	// of input Ref lies past a Vec-element boundary, so that every chunk is
	// aligned; the row's first and last chunks may be partial: their
	// vectors are loaded whole (the elements outside the row unused) and
	// stored element by element. Every RowContig input and the output lie
	// alike (ChooseRowVector); the chunks span Span(R) columns.
	Shifted bool
	Ref     int
	Persist int
	// Stash makes a looped kernel keep the row's inputs that reductions
	// read in dynamic shared memory (StashBytes(R) bytes per block).
	Stash bool
	// Cluster is the blocks of a cluster that share a row (2, 4 or 8; 0
	// or 1: a block a row). Only with Stash.
	Cluster int
	// Split makes a looped kernel of a region whose first stage is its
	// one reduction (CanSplit) reduce a row in several blocks (grid.y):
	// each writes its partial accumulator, and the kernel Name()+"_final"
	// combines a row's partials and computes the stages after it. For rows
	// that leave SMs idle a block a row.
	Split bool
	// Staged makes this kernel one pass of the staged form of a region
	// (CanStage) whose rows are split across blocks (grid.y) in every pass:
	// Stage is the reduction stage the pass reduces, its blocks writing
	// partial accumulators that Name()+"_final" combines before it
	// computes the stages up to the next reduction, keeping every stage's
	// value per row in prev; or len(Stages), the pass that computes the
	// root per element from them (StagedPasses lists the passes). For few
	// long rows of regions with several reductions, such as a softmax or
	// a layer norm.
	Staged bool
	Stage  int
	// Index32 indexes columns with 32-bit integers (valid when a row has
	// fewer than 2^31 - Threads·Vec elements); rows still use 64 bits.
	Index32 bool
}

// CanSplit reports whether the region's rows can be split across blocks:
// its first stage is a reduction, and the stages after it (an epilogue
// such as the negation of a sum, which the final pass applies) are
// computed once per row from it alone.
func (k *RowKernel) CanSplit() bool {
	if len(k.Stages) == 0 || !k.Stages[0].Reduce || k.Expr != nil {
		return false
	}
	for _, st := range k.Stages[1:] {
		if st.Reduce {
			return false
		}
		for i := range k.Inputs {
			if uses(st.Expr, i) {
				return false
			}
		}
	}
	return true
}

// CanStage reports whether the region can run in the staged form: it
// has a reduction, and every stage computed once per row reads earlier
// stages' values only (not the inputs, which the final passes do not
// take).
func (k *RowKernel) CanStage() bool {
	reduces := false
	for _, st := range k.Stages {
		if st.Reduce {
			reduces = true
			continue
		}
		for i := range k.Inputs {
			if uses(st.Expr, i) {
				return false
			}
		}
	}
	return reduces
}

// StagedPasses is the Stage of each pass of the staged form, in order:
// each reduction stage's, then len(Stages) where the root is per element.
func (k *RowKernel) StagedPasses() []int {
	var passes []int
	for s, st := range k.Stages {
		if st.Reduce {
			passes = append(passes, s)
		}
	}
	if k.Expr != nil {
		passes = append(passes, len(k.Stages))
	}
	return passes
}

// PrevDType is the element type of a staged kernel's per-row stage
// values: float64 if a stage's value is, else float32.
func (k *RowKernel) PrevDType() ir.DType {
	for _, st := range k.Stages {
		if st.Kind == ir.F64 {
			return ir.Float64
		}
	}
	return ir.Float32
}

// Name is the kernel's entry point, unique for its configuration.
func (k *RowKernel) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gc_row_%s", k.Label)
	for _, in := range k.Inputs {
		fmt.Fprintf(&b, "_%s%c%s", in.DType, "cus"[in.Access], in.Kind)
	}
	fmt.Fprintf(&b, "_%s_to_%s_t%dv%dp%d", k.Compute, k.Out, k.Threads, k.Vec, k.Persist)
	if k.groups() > 1 {
		fmt.Fprintf(&b, "g%d", k.groups())
	}
	if k.Stash {
		b.WriteString("_stash")
	}
	if k.Cluster > 1 {
		fmt.Fprintf(&b, "_c%d", k.Cluster)
	}
	if k.Split {
		b.WriteString("_split")
	}
	if k.Staged {
		fmt.Fprintf(&b, "_stage%d", k.Stage)
	}
	if k.Index32 {
		b.WriteString("_i32")
	}
	if k.Shifted {
		fmt.Fprintf(&b, "_sh%d", k.Ref)
	}

	return b.String()
}

// NewRowKernel is the kernel of the row region r, with every input
// contiguous along the row; set Inputs[i].Access, Vec, Threads and Persist
// for the layout at hand.
func NewRowKernel(r *fuse.Region) *RowKernel {
	k := &RowKernel{Expr: r.Expr, Compute: r.Compute, Out: r.Root.DType, Doc: r.Describe()}
	for _, in := range r.Inputs {
		k.Inputs = append(k.Inputs, RowInput{DType: in.Node.DType, Kind: in.Kind})
	}
	for _, st := range r.Row.Stages {
		k.Stages = append(k.Stages, RowStage{
			Name: st.Node.Name() + " = " + st.Node.Op.Name, Reduce: st.Reduce, Reducer: st.Reducer,
			Expr: st.Expr, Compute: st.Compute, Kind: st.Kind, DType: st.Node.DType,
		})
	}
	k.Label = rowLabel(k.Stages, r.Expr)
	return k
}

// ForLayout is a copy of k whose inputs' accesses, vector width and
// other launch choices may be set for one layout of its inputs without
// touching k, which other calls (other goroutines) use too.
func (k *RowKernel) ForLayout() RowKernel {
	c := *k
	c.Inputs = slices.Clone(k.Inputs)
	return c
}

// rowLabel names a row region's kernel by a hash of its expressions.
func rowLabel(stages []RowStage, root *ir.Expr) string {
	h := fnv.New64a()
	for _, s := range stages {
		fmt.Fprintf(h, "%v %v %v %v %v|", s.Reduce, s.Reducer, s.Expr, s.Compute, s.DType)
	}
	fmt.Fprint(h, root)
	return fmt.Sprintf("%016x", h.Sum64())
}

// RowGeometry is the layout of a row kernel's inputs: the outer (row)
// shape, and per input its strides over the outer dims and along the row.
// Passed by value as struct { long long orank, osize[8], ostride[n][8],
// istride[n]; } with n = max(len(Inputs), 1).
type RowGeometry struct {
	OuterRank   int
	OuterSize   [MaxRank]int64
	OuterStride [][MaxRank]int64
	InnerStride []int64
}

// Bytes encodes the geometry as the kernel parameter.
func (g *RowGeometry) Bytes() []byte {
	b := putInt64s(nil, int64(g.OuterRank))
	b = putInt64s(b, g.OuterSize[:]...)
	n := max(len(g.OuterStride), 1)
	for i := range n {
		if i < len(g.OuterStride) {
			b = putInt64s(b, g.OuterStride[i][:]...)
		} else {
			b = putInt64s(b, make([]int64, MaxRank)...)
		}
	}
	for i := range n {
		if i < len(g.InnerStride) {
			b = putInt64s(b, g.InnerStride[i])
		} else {
			b = putInt64s(b, 0)
		}
	}
	return b
}

// Span is how many columns the chunks of a row of r elements span: r, or
// for a Shifted kernel up to Vec-1 more, the head before the row.
func (k *RowKernel) Span(r int) int {
	if k.Shifted {
		return r + k.Vec - 1
	}
	return r
}

// RowTensor is a tensor a row kernel reads or writes, as ChooseRowVector
// sees it: the size of its elements, the address of its first one (only
// the low bits matter), its strides over the rows' dims and along a row.
type RowTensor struct {
	Size  int
	Addr  uint64
	Outer []int64
	Inner int64
}

// RowVector is how a row kernel reads its inputs along the rows
// (ChooseRowVector): the Vec, Shifted and Ref of the kernel and each
// input's Access.
type RowVector struct {
	Vec     int
	Shifted bool
	Ref     int
	Access  []RowAccess
}

// shiftMinVectors is the fewest vectors a row must hold for a Shifted
// kernel: shorter rows run several a warp, where each row's partial
// chunks and its own head cost more than vectors save (on an H200, rows
// of 173 16-bit elements ran 1.8x slower shifted, of 366 float32 ones
// 1.2x).
const shiftMinVectors = 64

// ChooseRowVector picks the vector access of a row kernel over rows of R
// elements of the inputs ins, writing elements of outSize bytes; out is
// the output when the root is per element (its rows contiguous), else nil.
// Vectors hold up to 16 bytes of the widest tensor read by vector and at
// most maxVec elements (a power of two up to 8). The plain form needs R
// and every contiguous input's offset and row strides to be multiples of
// Vec. Where the plain form would read a scalar at a time (odd row
// lengths, a view at an odd offset), a Shifted kernel reads the rows of
// the inputs that lie like the first contiguous input with rows (Ref) by
// aligned vectors anyway, if its rows hold shiftMinVectors vectors, and
// the other contiguous inputs (a norm's weight) element by element;
// shift false allows the plain form alone.
func ChooseRowVector(R, outSize, maxVec int, shift bool, ins []RowTensor, out *RowTensor) RowVector {
	rv := RowVector{Vec: 1, Access: make([]RowAccess, len(ins)), Ref: -1}
	widest := outSize
	for i, t := range ins {
		switch t.Inner {
		case 0:
			rv.Access[i] = RowUniform
		case 1:
			rv.Access[i] = RowContig
			widest = max(widest, t.Size)
			if rv.Ref < 0 && slices.ContainsFunc(t.Outer, func(s int64) bool { return s != 0 }) {
				rv.Ref = i
			}
		default:
			rv.Access[i] = RowStrided
		}
	}
	most := max(1, min(maxVec, 8, 16/widest))
	mod := func(v int64, w int) int64 { return (v%int64(w) + int64(w)) % int64(w) }
	// lies reports whether t's rows start on w-element boundaries as
	// like's do (nil: on the boundaries): the same remainders mod w of the
	// first element's index and of every outer stride.
	lies := func(t, like *RowTensor, w int) bool {
		if t.Addr%uint64(t.Size) != 0 || like != nil && (like.Addr%uint64(like.Size) != 0 || len(like.Outer) != len(t.Outer)) {
			return false
		}
		phase := func(u *RowTensor, d int) int64 { // d < 0: the first element
			switch {
			case u == nil:
				return 0
			case d < 0:
				return mod(int64(u.Addr/uint64(u.Size)), w)
			}
			return mod(u.Outer[d], w)
		}
		for d := -1; d < len(t.Outer); d++ {
			if phase(t, d) != phase(like, d) {
				return false
			}
		}
		return true
	}
	plain := func(w int) bool {
		if R%w != 0 || out != nil && !lies(out, nil, w) {
			return false
		}
		for i := range ins {
			if rv.Access[i] == RowContig && !lies(&ins[i], nil, w) {
				return false
			}
		}
		return true
	}
	for rv.Vec = most; rv.Vec > 1 && !plain(rv.Vec); rv.Vec /= 2 {
	}
	if rv.Vec > 1 || rv.Ref < 0 || !shift {
		rv.Ref = 0
		return rv
	}
	ref := &ins[rv.Ref]
	for w := most; w > rv.Vec; w /= 2 {
		if R < shiftMinVectors*w || out != nil && !lies(out, ref, w) {
			continue
		}
		rv.Vec, rv.Shifted = w, true
		for i := range ins {
			if rv.Access[i] == RowContig && !lies(&ins[i], ref, w) {
				rv.Access[i] = RowStrided
			}
		}
		return rv
	}
	rv.Ref = 0
	return rv
}

// ChooseRowConfig picks threads per block and the persistent depth for
// rows of r elements, with vec elements per access: a thread handles about
// 4 vectors, blocks have 32 to 1024 threads, and rows of up to 8 vectors
// per thread stay in registers, in blocks of at most maxPersist threads (a
// power of two from 32 to 1024).
func ChooseRowConfig(r, vec, maxPersist int) (threads, persist int) {
	unit := min(vec, 4) // wider vectors keep 4-wide ones' launch: the same elements a thread
	vectors := (r + unit - 1) / unit
	threads = 32
	for threads < 1024 && threads*4 < vectors {
		threads *= 2
	}
	per := (vectors + threads - 1) / threads
	if per <= 8 && threads <= maxPersist {
		return threads, (per*unit + vec - 1) / vec
	}
	if t := max(maxPersist, 32); threads > t && (vectors+t-1)/t <= 8 {
		return t, ((vectors+t-1)/t*unit + vec - 1) / vec
	}
	return threads, 0
}

// RowPlan is a launch shape for a row kernel (see ChooseRowPlan).
type RowPlan struct {
	Threads, Groups, Persist int
	Stash                    bool
	Cluster                  int
}

// RowDevice is what ChooseRowPlan needs to know of the device.
type RowDevice struct {
	SMs       int  // streaming multiprocessors
	MaxShared int  // dynamic shared memory a block may use, bytes (0: no stash)
	Clusters  bool // thread block clusters with distributed shared memory (sm_90)
	// MaxPersist is the most threads a persistent block may have (0:
	// 1024); longer rows are stashed or looped.
	MaxPersist int
}

// ChooseRowPlan picks a row kernel's launch shape for rows rows of r
// elements read vec at a time on device d; stashBytes(n) is the kernel's
// StashBytes(n). Short rows share warps: a group of threads as small as
// leaves each about 4 vectors, blocks of 128 threads (Groups rows at
// once). Rows of up to 8 vectors per thread stay in registers
// (persistent), unless they are long and read a scalar at a time. Longer
// rows are stashed in shared memory, split across a cluster of up to 8
// blocks when one block's shared memory cannot hold the row or when there
// are too few rows to give every SM one; rows that do not fit even so are
// looped.
//
// A nil stashBytes means the kernel gains nothing from a stash (see
// Rereads): long rows are looped.
func ChooseRowPlan(d RowDevice, r, vec, rows int, stashBytes func(n int) int) RowPlan {
	unit := min(vec, 4) // wider vectors keep 4-wide ones' launch: the same elements a thread
	vectors := max((r+unit-1)/unit, 1)
	if vectors <= 4*16 { // up to 16 threads a row: several rows per warp
		t := 1
		for t*4 < vectors {
			t *= 2
		}
		return RowPlan{Threads: t, Groups: 128 / t, Persist: ((vectors+t-1)/t*unit + vec - 1) / vec}
	}
	if vectors <= 8*32 && rows >= 4 {
		// A warp a row, four to a block: its reductions are shuffles alone,
		// where a block a row of 64 to 256 threads would pass partials
		// through shared memory and wait at barriers, for rows of a few
		// hundred elements.
		return RowPlan{Threads: 32, Groups: 4, Persist: ((vectors+31)/32*unit + vec - 1) / vec}
	}
	maxPersist := d.MaxPersist
	if maxPersist <= 0 {
		maxPersist = 1024
	}
	threads, persist := ChooseRowConfig(r, vec, maxPersist)
	looped := RowPlan{Threads: threads, Groups: 1, Persist: persist}
	if persist > 0 || stashBytes == nil {
		return looped
	}
	// The stash: the fewest blocks a row whose shares fit, and enough
	// blocks for every SM when rows are few.
	maxC := 1
	if d.Clusters {
		maxC = 8
	}
	// A block alone on its SM would wait for memory and compute in turn:
	// shares of at most a third of the shared memory keep three blocks on
	// each SM, unless even the largest cluster's shares are bigger.
	for c := 1; c <= maxC; c *= 2 {
		chunk := (r + c - 1) / c
		chunk = (chunk + vec - 1) / vec * vec
		bytes := stashBytes(chunk)
		few := rows*c < d.SMs && chunk > 16*vec*128
		small := bytes <= d.MaxShared/3
		if bytes > d.MaxShared || c < maxC && (few || !small) {
			continue
		}
		// Threads enough that each copies one batch of stashUnroll vectors.
		cv := (chunk + vec - 1) / vec
		su := stashUnroll(vec, max(stashBytes(1024)/1024, 1))
		t := 128
		for t < 512 && t*su < cv {
			t *= 2
		}
		return RowPlan{Threads: t, Groups: 1, Stash: true, Cluster: c}
	}
	return looped
}

// SplitThreads is the block size of a split row kernel.
const SplitThreads = 512

// ChooseRowSplit is how many blocks of SplitThreads threads share each of
// rows rows of r elements in the split form of a lone reduction (Split),
// or 1 where the looped form (a block of threads threads a row) is as
// fast. The model counts waves of resident blocks (2048 threads an SM):
// a wave takes as long as a thread's vectors, or longer where its threads
// ask more of an SM's memory bandwidth than rowSaturation threads can,
// plus a fixed cost. Few rows leave SMs idle and a count of rows just past
// a wave leaves most of the last one idle; splitting fills both. Each part
// covers at least four passes of its block, and the split form pays one
// more fixed cost for its final pass.
func ChooseRowSplit(d RowDevice, r, vec, rows, threads int) int {
	if rows <= 0 || r <= 0 || d.SMs <= 0 || threads <= 0 {
		return 1
	}
	ceil := func(a, b int) int { return (a + b - 1) / b }
	best, bestCost := 1, rowWaves(d.SMs, rows, threads, ceil(r, threads*vec))
	maxParts := min(ceil(r, SplitThreads*vec*4), 65535)
	try := func(p int) {
		p = min(p, maxParts)
		if p < 2 {
			return
		}
		if c := rowWaves(d.SMs, rows*p, SplitThreads, ceil(r, p*SplitThreads*vec)) + rowFixed; c < bestCost {
			best, bestCost = p, c
		}
	}
	// The candidates: small counts, and the most that fill a whole
	// number of waves, or the fewest that do.
	resident := d.SMs * rowThreadsPerSM / SplitThreads
	for p := 2; p <= 16; p++ {
		try(p)
	}
	for w := 1; w <= 8; w++ {
		try(w * resident / rows)
		try(ceil(w*resident, rows))
	}
	return best
}

// ChooseRowStage is ChooseRowSplit for the staged form of a region with
// several reductions (Staged), or 1 where the looped form is as fast. Each
// staged pass reads its rows from memory where a looped block reads its
// row again from L2, and each reduction launches two kernels: the split
// must cut the model's time by stagedGain to pay for that.
func ChooseRowStage(d RowDevice, r, vec, rows, threads int) int {
	p := ChooseRowSplit(d, r, vec, rows, threads)
	if p < 2 {
		return 1
	}
	ceil := func(a, b int) int { return (a + b - 1) / b }
	looped := rowWaves(d.SMs, rows, threads, ceil(r, threads*vec))
	split := rowWaves(d.SMs, rows*p, SplitThreads, ceil(r, p*SplitThreads*vec)) + rowFixed
	if split*stagedGain > looped {
		return 1
	}
	return p
}

// stagedGain is how much faster ChooseRowStage's model must find the
// staged form than the looped one.
const stagedGain = 1.5

// The constants of ChooseRowSplit's model: the threads an SM holds, the
// threads whose loads (a vector each) saturate its share of the memory
// bandwidth, and a block's fixed cost (its reduction's tail and launch),
// in the time of one vector load.
const (
	rowThreadsPerSM = 2048
	rowSaturation   = 1024
	rowFixed        = 2
)

// rowWaves is the time ChooseRowSplit's model gives blocks blocks of
// threads threads, each thread loading perThread vectors, on sms SMs.
func rowWaves(sms, blocks, threads, perThread int) float64 {
	resident := sms * max(rowThreadsPerSM/threads, 1)
	wave := func(b int) float64 {
		load := float64(b*threads) / float64(sms*rowSaturation) // in saturating sets of threads an SM
		return float64(perThread)*max(1, load) + rowFixed
	}
	total := float64(blocks/resident) * wave(resident)
	if rest := blocks % resident; rest > 0 {
		total += wave(rest)
	}
	return total
}

// Rereads reports whether the kernel reads a row's inputs again after a
// reduction has read them (a later stage or the root does): only then
// does keeping the row on chip (Persist, Stash) save reading memory.
func (k *RowKernel) Rereads() bool {
	for i, in := range k.Inputs {
		if in.Access == RowUniform {
			continue
		}
		read := false
		for _, st := range k.Stages {
			if read && uses(st.Expr, i) {
				return true
			}
			read = read || st.Reduce && uses(st.Expr, i)
		}
		if read && uses(k.Expr, i) {
			return true
		}
	}
	return false
}

// stashUnroll is how many vectors of vec elements of size bytes a thread
// loads at once into the stash: 64 bytes in flight a thread (to hide the
// memory's latency), at most 16 loads.
func stashUnroll(vec, size int) int { return max(1, min(16, 64/(vec*size))) }

// StashBytes is the dynamic shared memory a Stash kernel uses for rows (or,
// in a cluster, shares of rows) of r elements: each input a reduction
// reads, in its storage type, 16-byte aligned.
func (k *RowKernel) StashBytes(r int) int {
	n := 0
	for i, h := range k.heldInputs(true) {
		if h {
			n += (r*k.Inputs[i].DType.Size() + 15) &^ 15
		}
	}
	return n
}

// heldInputs reports, per input, whether a persistent or stashed kernel
// keeps it on chip: the inputs its reductions read (inputs only the root
// reads, a norm's weight and bias, are loaded where the root needs them).
func (k *RowKernel) heldInputs(on bool) []bool {
	held := make([]bool, len(k.Inputs))
	if !on {
		return held
	}
	for i, in := range k.Inputs {
		for _, st := range k.Stages {
			held[i] = held[i] || (in.Access != RowUniform && st.Reduce && uses(st.Expr, i))
		}
	}
	return held
}

func (k *RowKernel) groups() int { return max(k.Groups, 1) }

// Source generates the kernel's CUDA C. Parameters: long long rows, long
// long R, one const pointer per input, the output pointer, RowGeometry g.
// Launch with Threads*Groups threads per block (and StashBytes(R) bytes of
// dynamic shared memory when Stash); blocks loop over rows. A Split
// kernel takes long long chunk (the columns each block reduces, a multiple
// of Vec) after R and a pointer to rows×grid.y partial accumulators (of
// the stage's compute kind) after the output, and is launched with grid
// (rows, parts); then Name()+"_final"(long long rows, long long parts, long
// long R, partial, out) with one block of Threads threads per row.
func (k *RowKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("// gocompile fused row kernel %s: %s\n", k.Label, k.Doc) + fast16(k.Out) + cudaPrelude + body, nil
}

func (k *RowKernel) leafKinds() []ir.Kind {
	var kinds []ir.Kind
	for _, in := range k.Inputs {
		kinds = append(kinds, in.Kind)
	}
	for _, s := range k.Stages {
		kinds = append(kinds, s.Kind)
	}
	return kinds
}

func (k *RowKernel) body() (string, error) {
	if k.Vec != 1 && k.Vec != 2 && k.Vec != 4 && k.Vec != 8 {
		return "", fmt.Errorf("row kernel %s: vector width %d", k.Label, k.Vec)
	}
	G := k.groups()
	switch {
	case k.Threads < 1 || k.Threads > 1024 || k.Threads&(k.Threads-1) != 0:
		return "", fmt.Errorf("row kernel %s: %d threads a row", k.Label, k.Threads)
	case G > 1 && (k.Threads > 32 || k.Threads*G > 1024 || k.Threads*G%32 != 0 || k.Split):
		return "", fmt.Errorf("row kernel %s: %d groups of %d threads", k.Label, G, k.Threads)
	case G == 1 && k.Threads < 32:
		return "", fmt.Errorf("row kernel %s: a block of %d threads (use groups)", k.Label, k.Threads)
	case k.Stash && (k.Persist > 0 || k.Split || k.Staged):
		return "", fmt.Errorf("row kernel %s: only a looped kernel of whole rows stashes", k.Label)
	case k.Staged && (k.Split || k.Persist > 0 || G > 1 || !k.CanStage() || !slices.Contains(k.StagedPasses(), k.Stage)):
		return "", fmt.Errorf("row kernel %s: stage %d is not a pass of a looped staged kernel", k.Label, k.Stage)
	case k.Cluster > 1 && (!k.Stash || G > 1 || k.Cluster > 8 || k.Cluster&(k.Cluster-1) != 0):
		return "", fmt.Errorf("row kernel %s: a cluster of %d blocks (2, 4 or 8, stashed rows)", k.Label, k.Cluster)
	}
	C := max(k.Cluster, 1)
	shifted := 0
	if k.Shifted {
		if k.Vec == 1 || k.Ref < 0 || k.Ref >= len(k.Inputs) || k.Inputs[k.Ref].Access != RowContig {
			return "", fmt.Errorf("row kernel %s: shifted chunks of %d by input %d", k.Label, k.Vec, k.Ref)
		}
		shifted = 1
	}
	kinds := k.leafKinds()
	nIn := len(k.Inputs)
	var b strings.Builder
	fmt.Fprintf(&b, `
#define THREADS %d
#define GROUPS %d
#define VEC %d
#define PERSIST %d
#define CLUSTER %d
#define LOOP_UNROLL %d
#define SHIFTED %d
// A chunk of VEC columns from j0 lies whole in the block's columns
// [jlo, jhi); column j is one of them (a Shifted kernel's chunks start
// before the row and may end past it). A chunk's vector is aligned and
// holds an element of the row, so it lies in the row's allocation (whose
// blocks are multiples of 512 bytes): partial chunks load it whole and
// use their row's elements alone, but store element by element.
#define CHUNK_FULL(j0) (!SHIFTED || ((j0) >= 0 && (j0) + VEC <= jhi))
#define COL_OK(j) (!SHIFTED || ((j) >= 0 && (j) < jhi))
struct RowGeometry { long long orank; long long osize[%d]; long long ostride[%d][%[8]d]; long long istride[%[9]d]; };

// block_allreduce combines the v of each thread of a row's group with c
// and gives each of them the result; partials combine in a fixed order,
// so results repeat exactly. Every lane of a warp calls it.
template <typename T, typename C> __device__ __forceinline__ T block_allreduce(T v, C c) {
  __shared__ T partial[32];
  for (int d = (THREADS < 32 ? THREADS : 32) / 2; d > 0; d >>= 1) v = c(v, __shfl_xor_sync(0xffffffffu, v, d));
  if (THREADS > 32) {
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < THREADS / 32; w++) v = c(v, partial[w]);
    __syncthreads();
  }
  return v;
}
`, k.Threads, G, k.Vec, k.Persist, C, k.loopUnroll(), shifted, MaxRank, max(nIn, 1))
	// Not part of the format above: its inline PTX names operands %0, %1.
	b.WriteString(clusterAllreduce(C))

	b.WriteString(stageCombines(k.Stages))

	// Signature and per-row setup.
	if k.Split && (!k.CanSplit() || k.Persist > 0) {
		return "", fmt.Errorf("row kernel %s: only a looped kernel of one reduction splits", k.Label)
	}
	J := "long long" // column indices
	if k.Index32 {
		J = "int"
	}
	params := []string{"long long rows", "long long R"}
	if k.Split || k.Staged {
		params = append(params, "long long chunk")
	}
	for i, in := range k.Inputs {
		params = append(params, fmt.Sprintf("const %s* __restrict__ x%d", storageC(in.DType), i))
	}
	outType := storageC(k.Out)
	params = append(params, fmt.Sprintf("%s* __restrict__ out", outType))
	if k.Split {
		params = append(params, fmt.Sprintf("%s* __restrict__ partial", kindC(k.Stages[0].Compute)))
	}
	if k.Staged {
		params = append(params, fmt.Sprintf("%s* __restrict__ partial", k.stagedPartialC()),
			fmt.Sprintf("const %s* __restrict__ prev", storageC(k.PrevDType())))
	}
	params = append(params, "RowGeometry g")
	attr := ""
	if C > 1 {
		attr = fmt.Sprintf("__cluster_dims__(%d, 1, 1) ", C)
	}
	fmt.Fprintf(&b, "\nextern \"C\" __global__ void __launch_bounds__(THREADS * GROUPS) %s%s(\n    %s) {\n  gc_dependent_entry();\n", attr, k.Name(), strings.Join(params, ",\n    "))
	b.WriteString("  // The thread's place in its row's group, and its group in the block.\n")
	b.WriteString("  const int tid = GROUPS > 1 ? threadIdx.x % THREADS : threadIdx.x, grp = GROUPS > 1 ? threadIdx.x / THREADS : 0;\n")
	if k.Stash {
		b.WriteString("#ifndef GC_EXTERN_SHARED\n#define GC_EXTERN_SHARED extern __shared__ __align__(16)\n#endif\n")
		b.WriteString("  GC_EXTERN_SHARED unsigned char stash_raw[];\n")
	}
	if C > 1 {
		b.WriteString("  // A cluster handles a row: this block, its rank z, the columns [jlo, jhi).\n")
		b.WriteString("  const unsigned z = blockIdx.x % CLUSTER;  // the rank in the cluster: a 1-D grid of 1-D clusters\n")
		fmt.Fprintf(&b, "  const %[1]s chunk = (%[1]s)(((R + SHIFTED * (VEC - 1) + CLUSTER - 1) / CLUSTER + VEC - 1) / VEC * VEC);\n", J)
		b.WriteString("  for (long long row = blockIdx.x / CLUSTER; row < rows; row += gridDim.x / CLUSTER) {\n")
		b.WriteString("    const bool live = true;\n    (void)live;\n")
	} else {
		b.WriteString("  // Groups past the last row redo it (every lane of a warp reduces) and store nothing.\n")
		b.WriteString("  for (long long r0 = (long long)blockIdx.x * GROUPS; r0 < rows; r0 += (long long)gridDim.x * GROUPS) {\n")
		b.WriteString("    const bool live = r0 + grp < rows;\n    const long long row = live ? r0 + grp : rows - 1;\n    (void)live;\n")
	}
	if nIn > 0 {
		b.WriteString("    // Each input's offset of the row's first element.\n    long long base[" + fmt.Sprint(nIn) + "] = {0};\n")
		fmt.Fprintf(&b, "    if (g.orank == 1) {  // the common case after merging dims: no division\n      for (int t = 0; t < %d; t++) base[t] = row * g.ostride[t][0];\n    } else {\n", nIn)
		b.WriteString("      for (long long rem = row, d = g.orank - 1; d >= 0; d--) {\n        long long c = rem % g.osize[d];\n        rem /= g.osize[d];\n")
		fmt.Fprintf(&b, "        for (int t = 0; t < %d; t++) base[t] += c * g.ostride[t][d];\n      }\n    }\n", nIn)
	}
	if k.Shifted {
		fmt.Fprintf(&b, "    // The row's chunks start head elements before it: where its first element of x%d lies past a vector boundary.\n", k.Ref)
		fmt.Fprintf(&b, "    const int head = (int)(((unsigned long long)(x%d + base[%[1]d]) / sizeof(*x%[1]d)) & (VEC - 1));\n", k.Ref)
	} else {
		b.WriteString("    const int head = 0;\n")
	}
	switch {
	case C > 1:
		fmt.Fprintf(&b, "    const %[1]s jlo = (%[1]s)min((long long)z * chunk - head, R), jhi = (%[1]s)min((long long)jlo + chunk, R);\n", J)
	case k.Split || k.Staged:
		b.WriteString("    // This block takes columns [jlo, jhi) of one row.\n")
		fmt.Fprintf(&b, "    const %[1]s jlo = (%[1]s)(blockIdx.y * chunk) - head, jhi = (%[1]s)min(R, (long long)jlo + chunk);\n", J)
	default:
		fmt.Fprintf(&b, "    const %[1]s jlo = -head, jhi = (%[1]s)R;\n", J)
	}
	for i, in := range k.Inputs {
		if in.Access == RowUniform {
			fmt.Fprintf(&b, "    const %s u%d = %s;\n", kindC(in.Kind), i, loadC(fmt.Sprintf("x%d[base[%d]]", i, i), in.DType, in.Kind))
		}
	}

	// A persistent kernel holds in registers the inputs its reductions
	// read; inputs only the root reads (a norm's weight and bias) are
	// loaded where the root needs them, saving registers.
	held := k.heldInputs(k.Persist > 0 || k.Stash)
	// elem names leaf i for the element at register slot q (held inputs),
	// in the stash at column j0 + v (stashed inputs), or v (inputs loaded
	// in the loop).
	elem := func(q string) func(i int) string {
		return func(i int) string {
			switch {
			case i >= nIn:
				return fmt.Sprintf("rv%d", i-nIn)
			case k.Inputs[i].Access == RowUniform:
				return fmt.Sprintf("u%d", i)
			case held[i] && k.Stash:
				return loadC(fmt.Sprintf("stash%d[SIDX(j0, v)]", i), k.Inputs[i].DType, k.Inputs[i].Kind)
			case held[i]:
				return fmt.Sprintf("e%d[%s]", i, q)
			}
			return fmt.Sprintf("e%d[uv]", i)
		}
	}
	// loads fills e<i>[...] of the inputs which selects with the VEC
	// elements from column j0 (into slot base q).
	loads := func(indent, q string, which func(int) bool) string {
		var l strings.Builder
		for i, in := range k.Inputs {
			x := fmt.Sprintf("x%d", i)
			switch {
			case in.Access == RowUniform || !which(i):
			case in.Access == RowContig && k.Vec > 1:
				// A Shifted kernel's partial chunks load whole vectors too:
				// their elements outside the row are never used.
				fmt.Fprintf(&l, "%s{ const VN<%s, VEC> v = *(const VN<%[2]s, VEC>*)(%s + base[%d] + j0);\n", indent, storageC(in.DType), x, i)
				fmt.Fprintf(&l, "%s  for (int e = 0; e < VEC; e++) e%d[%s + e] = %s; }\n", indent, i, q, loadC("v.v[e]", in.DType, in.Kind))
			case in.Access == RowContig:
				fmt.Fprintf(&l, "%se%d[%s] = %s;\n", indent, i, q, loadC(fmt.Sprintf("%s[base[%d] + j0]", x, i), in.DType, in.Kind))
			case k.Shifted:
				fmt.Fprintf(&l, "%sfor (int v = 0; v < VEC; v++) e%d[%s + v] = COL_OK(j0 + v) ? %s : (%s)0;\n", indent, i, q,
					loadC(fmt.Sprintf("%s[base[%d] + (j0 + v) * g.istride[%d]]", x, i, i), in.DType, in.Kind), kindC(in.Kind))
			default:
				fmt.Fprintf(&l, "%sfor (int v = 0; v < VEC; v++) e%d[%s + v] = %s;\n", indent, i, q,
					loadC(fmt.Sprintf("%s[base[%d] + (j0 + v) * g.istride[%d]]", x, i, i), in.DType, in.Kind))
			}
		}
		return l.String()
	}
	declare := func(indent string, n string, which func(int) bool) string {
		var l strings.Builder
		for i, in := range k.Inputs {
			if in.Access != RowUniform && which(i) {
				fmt.Fprintf(&l, "%s%s e%d[%s];\n", indent, kindC(in.Kind), i, n)
			}
		}
		return l.String()
	}
	// forEach wraps body (code for one element at slot "q", column "j")
	// in the loops over a thread's elements of the row, with pre and post
	// around each vector's elements; e reads the inputs that are not held.
	// A looped kernel loads LOOP_UNROLL vectors of those at once before
	// using them, so that a thread keeps several loads in flight.
	forEach := func(body string, e *ir.Expr, pre, post string) string {
		inLoop := func(i int) bool { return !held[i] && uses(e, i) }
		var l strings.Builder
		vector := func(indent string) {
			l.WriteString(pre)
			fmt.Fprintf(&l, "%s#pragma unroll\n%sfor (int v = 0; v < VEC; v++) {\n", indent, indent)
			fmt.Fprintf(&l, "%s  const %s j = j0 + v;\n%[1]s  (void)j;\n", indent, J)
			if k.Shifted {
				fmt.Fprintf(&l, "%s  if (COL_OK(j)) {\n", indent)
			}
			l.WriteString(body)
			if k.Shifted {
				fmt.Fprintf(&l, "%s  }\n", indent)
			}
			fmt.Fprintf(&l, "%s}\n", indent)
			l.WriteString(post)
		}
		if k.Persist > 0 {
			l.WriteString("    #pragma unroll\n    for (int p = 0; p < PERSIST; p++) {\n")
			fmt.Fprintf(&l, "      const %[1]s j0 = jlo + ((%[1]s)p * THREADS + tid) * VEC;\n", J)
			l.WriteString("      if (j0 < jhi) {\n")
			l.WriteString(declare("        ", "VEC", inLoop))
			l.WriteString(loads("        ", "0", inLoop))
			l.WriteString("        const int pv = p * VEC;\n        (void)pv;\n")
			body = "          const int q = pv + v, uv = v;\n          (void)q;\n          (void)uv;\n" + body
			vector("        ")
			l.WriteString("      }\n    }\n")
			return l.String()
		}
		fmt.Fprintf(&l, "    for (%[1]s ju = jlo + (%[1]s)tid * VEC; ju < jhi; ju += (%[1]s)THREADS * VEC * LOOP_UNROLL) {\n", J)
		l.WriteString(declare("      ", "LOOP_UNROLL * VEC", inLoop))
		if anyOf(inLoop, nIn) {
			l.WriteString("      #pragma unroll\n      for (int u = 0; u < LOOP_UNROLL; u++) {\n")
			fmt.Fprintf(&l, "        const %[1]s j0 = ju + (%[1]s)u * THREADS * VEC;\n", J)
			l.WriteString("        if (j0 < jhi) {\n")
			l.WriteString(loads("          ", "u * VEC", inLoop))
			l.WriteString("        }\n      }\n")
		}
		l.WriteString("      #pragma unroll\n      for (int u = 0; u < LOOP_UNROLL; u++) {\n")
		fmt.Fprintf(&l, "        const %[1]s j0 = ju + (%[1]s)u * THREADS * VEC;\n", J)
		l.WriteString("        if (j0 < jhi) {\n")
		body = "            const int uv = u * VEC + v;\n            (void)uv;\n" + body
		vector("          ")
		l.WriteString("        }\n      }\n    }\n")
		return l.String()
	}
	if k.Persist > 0 {
		b.WriteString("    // The thread's elements of the row, loaded once.\n")
		isHeld := func(i int) bool { return held[i] }
		b.WriteString(declare("    ", "PERSIST * VEC", isHeld))
		b.WriteString("    #pragma unroll\n    for (int p = 0; p < PERSIST; p++) {\n")
		fmt.Fprintf(&b, "      const %[1]s j0 = jlo + ((%[1]s)p * THREADS + tid) * VEC;\n", J)
		b.WriteString("      if (j0 < jhi) {\n")
		b.WriteString(loads("        ", "p * VEC", isHeld))
		b.WriteString("      }\n    }\n")
	}
	if k.Stash {
		b.WriteString(k.stashLoop(held, J))
	}

	NS := len(k.Stages)
	for s, st := range k.Stages {
		K := kindC(st.Kind)
		if k.Staged && s < k.Stage {
			fmt.Fprintf(&b, "    // %s, from an earlier pass\n    const %s rv%d = (%[2]s)prev[row * %[4]d + %[3]d];\n", st.Name, K, s, NS)
			continue
		}
		if !st.Reduce {
			code, err := k.onceStage(s, elem("0"), kinds)
			if err != nil {
				return "", err
			}
			b.WriteString(code)
			continue
		}
		e, err := st.Expr.C(elem("q"), noParam, kinds, st.Compute)
		if err != nil {
			return "", fmt.Errorf("row kernel %s: stage %s: %w", k.Label, st.Name, err)
		}
		A := kindC(st.Compute)
		fmt.Fprintf(&b, "    // %s: %v over the row of %s\n    %s acc%d = %s;\n", st.Name, st.Reducer, k.exprDoc(st.Expr), A, s, st.Reducer.CIdentity(st.Compute))
		b.WriteString(forEach(fmt.Sprintf("          acc%[1]d = combine%[1]d()(acc%[1]d, (%[2]s)(%[3]s));\n", s, A, e), st.Expr, "", ""))
		fmt.Fprintf(&b, "    acc%d = block_allreduce(acc%[1]d, combine%[1]d());\n", s)
		if C > 1 {
			fmt.Fprintf(&b, "    acc%d = cluster_allreduce(acc%[1]d, combine%[1]d());\n", s)
		}
		if k.Staged {
			fmt.Fprintf(&b, "    if (tid == 0) partial[row * gridDim.y + blockIdx.y] = acc%d;\n  }\n}\n", s)
			final, err := k.stagedFinal(s, elem("0"), kinds, outType)
			if err != nil {
				return "", err
			}
			b.WriteString(final)
			return b.String(), nil
		}
		if k.Split {
			fmt.Fprintf(&b, "    if (tid == 0) partial[row * gridDim.y + blockIdx.y] = acc%d;\n  }\n}\n", s)
			fmt.Fprintf(&b, `
// The second pass: a row's partial accumulators, combined in order.
extern "C" __global__ void __launch_bounds__(THREADS) %s_final(
    long long rows, long long parts, long long R, const %s* __restrict__ partial, %s* __restrict__ out) {
  const int tid = threadIdx.x;
  const bool live = true;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    %s acc%d = %s;
    for (long long p = threadIdx.x; p < parts; p += THREADS) acc%[5]d = combine%[5]d()(acc%[5]d, partial[row * parts + p]);
    acc%[5]d = block_allreduce(acc%[5]d, combine%[5]d());
`, k.Name(), A, outType, A, s, st.Reducer.CIdentity(st.Compute))
		}
		fin := fmt.Sprintf("acc%d", s)
		if st.Reducer == ir.RMean {
			fin = fmt.Sprintf("acc%d / (%s)R", s, A)
		}
		fmt.Fprintf(&b, "    const %s rv%d = %s;\n", K, s, loadC(storeC(fin, st.Compute, st.DType), st.DType, st.Kind))
	}

	if k.Expr == nil {
		if len(k.Stages) == 0 {
			return "", fmt.Errorf("row kernel %s: no root", k.Label)
		}
		last := len(k.Stages) - 1
		first := "tid == 0"
		if C > 1 {
			first = "tid == 0 && z == 0"
		}
		fmt.Fprintf(&b, "    if (live && %s) out[row] = %s;\n  }\n}\n", first, storeC(fmt.Sprintf("rv%d", last), k.Stages[last].Kind, k.Out))
		return b.String(), nil
	}
	e, outKind, err := k.rootC(elem("q"), kinds, "row kernel")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "    // the root, per element: %s\n", k.exprDoc(k.Expr))
	if k.Vec > 1 {
		fmt.Fprintf(&b, "    %s* orow = out + row * R;\n", outType)
		// Gather the results of a vector and store them at once.
		store := "        if (live) *(VN<" + outType + ", VEC>*)(orow + j0) = r;\n"
		if k.Shifted {
			store = "        if (live && CHUNK_FULL(j0)) *(VN<" + outType + ", VEC>*)(orow + j0) = r;\n" +
				"        else if (live) for (int v = 0; v < VEC; v++) if (COL_OK(j0 + v)) orow[j0 + v] = r.v[v];\n"
		}
		b.WriteString(forEach(fmt.Sprintf("          r.v[v] = %s;\n", storeC(e, outKind, k.Out)), k.Expr,
			fmt.Sprintf("        VN<%s, VEC> r;\n", outType), store))
	} else {
		b.WriteString(forEach(fmt.Sprintf("          if (live && j < R) out[row * R + j] = %s;\n", storeC(e, outKind, k.Out)), k.Expr, "", ""))
	}
	b.WriteString("  }\n}\n")
	return b.String(), nil
}

// onceValue is the C value of a stage computed once per row (or output),
// rounded to its dtype as a store would; elem names the leaves, kernel
// the kernel's kind for errors.
func (k *RowKernel) onceValue(st RowStage, elem func(int) string, kinds []ir.Kind, kernel string) (string, error) {
	e, err := st.Expr.C(elem, noParam, kinds, st.Compute)
	if err != nil {
		return "", fmt.Errorf("%s %s: stage %s: %w", kernel, k.Label, st.Name, err)
	}
	_, ok, err := st.Expr.ParamKinds(kinds, st.Compute)
	if err != nil {
		return "", err
	}
	return loadC(storeC(e, ok, st.DType), st.DType, st.Kind), nil
}

// onceStage is the code computing stage s, computed once per row, as
// rv<s>; elem names the leaves.
func (k *RowKernel) onceStage(s int, elem func(int) string, kinds []ir.Kind) (string, error) {
	st := k.Stages[s]
	v, err := k.onceValue(st, elem, kinds, "row kernel")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("    // %s, once per row\n    const %s rv%d = %s;\n", st.Name, kindC(st.Kind), s, v), nil
}

// stagedPartialC is the C type of a staged pass's partial accumulators:
// its reduction's compute kind (the root's pass has none: float).
func (k *RowKernel) stagedPartialC() string {
	if k.Stage < len(k.Stages) {
		return kindC(k.Stages[k.Stage].Compute)
	}
	return "float"
}

// stagedFinal is the final pass after a staged kernel's reduction stage
// s: it combines each row's partials in order, computes the stages up to
// the next reduction and keeps them in prev; after the last reduction of a
// region whose root is a stage, it writes the root.
func (k *RowKernel) stagedFinal(s int, elem func(int) string, kinds []ir.Kind, outType string) (string, error) {
	st := k.Stages[s]
	A, P, NS := kindC(st.Compute), storageC(k.PrevDType()), len(k.Stages)
	var b strings.Builder
	fmt.Fprintf(&b, `
// The final pass of stage %s: a row's partial accumulators, combined in
// order, and the stages that follow it up to the next reduction.
extern "C" __global__ void __launch_bounds__(THREADS) %s_final(
    long long rows, long long parts, long long R, const %s* __restrict__ partial, %s* __restrict__ prev, %s* __restrict__ out) {
  const int tid = threadIdx.x;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
`, st.Name, k.Name(), A, P, outType)
	for j := range s {
		fmt.Fprintf(&b, "    const %s rv%d = (%[1]s)prev[row * %[3]d + %[2]d];\n", kindC(k.Stages[j].Kind), j, NS)
	}
	fmt.Fprintf(&b, "    %s acc%d = %s;\n", A, s, st.Reducer.CIdentity(st.Compute))
	fmt.Fprintf(&b, "    for (long long p = tid; p < parts; p += THREADS) acc%d = combine%[1]d()(acc%[1]d, partial[row * parts + p]);\n", s)
	fmt.Fprintf(&b, "    acc%d = block_allreduce(acc%[1]d, combine%[1]d());\n", s)
	fin := fmt.Sprintf("acc%d", s)
	if st.Reducer == ir.RMean {
		fin = fmt.Sprintf("acc%d / (%s)R", s, A)
	}
	fmt.Fprintf(&b, "    const %s rv%d = %s;\n", kindC(st.Kind), s, loadC(storeC(fin, st.Compute, st.DType), st.DType, st.Kind))
	next := s + 1
	for ; next < NS && !k.Stages[next].Reduce; next++ {
		code, err := k.onceStage(next, elem, kinds)
		if err != nil {
			return "", err
		}
		b.WriteString(code)
	}
	b.WriteString("    if (tid == 0) {\n")
	for j := s; j < next; j++ {
		fmt.Fprintf(&b, "      prev[row * %d + %d] = (%s)rv%d;\n", NS, j, P, j)
	}
	if next == NS && k.Expr == nil {
		fmt.Fprintf(&b, "      out[row] = %s;\n", storeC(fmt.Sprintf("rv%d", NS-1), k.Stages[NS-1].Kind, k.Out))
	}
	b.WriteString("    }\n  }\n}\n")
	return b.String(), nil
}

// loopUnroll is how many vectors a thread of a looped kernel loads at
// once: 32 bytes of its widest input read in the loop, up to 8 vectors.
// A stashed kernel reads its row from shared memory, which needs no more
// loads in flight (unrolled, 16-bit softmaxes ran 8-20% slower on an
// H200).
func (k *RowKernel) loopUnroll() int {
	if k.Persist > 0 || k.Stash {
		return 1
	}
	widest := 1
	for _, in := range k.Inputs {
		if in.Access != RowUniform {
			widest = max(widest, in.DType.Size())
		}
	}
	return max(1, min(8, 32/(k.Vec*widest)))
}

// anyOf reports whether f holds for any of 0..n-1.
func anyOf(f func(int) bool, n int) bool {
	for i := range n {
		if f(i) {
			return true
		}
	}
	return false
}

// stageCombines is the combine functor (combine<s>) of each reduction
// stage s; row and column kernels fold with them.
func stageCombines(stages []RowStage) string {
	var b strings.Builder
	for s, st := range stages {
		if st.Reduce {
			K := kindC(st.Compute)
			fmt.Fprintf(&b, "// %s: %v\nstruct combine%d { __device__ __forceinline__ %s operator()(%[4]s a, %[4]s b) const { return %[5]s; } };\n",
				st.Name, st.Reducer, s, K, st.Reducer.CCombine("a", "b"))
		}
	}
	return b.String()
}

// stashLoop is the code that copies the row's held inputs (this block's
// share of them, in a cluster) into the stash: each thread copies the
// columns it later reads back itself, so no barrier is needed, loading
// SU vectors before storing them so that many loads are in flight.
// Element j0 + v of a thread's vector sits at SIDX(j0, v), so that a
// warp's lanes touch consecutive words.
func (k *RowKernel) stashLoop(held []bool, J string) string {
	var b strings.Builder
	size := 1
	for i, h := range held {
		if h {
			size = max(size, k.Inputs[i].DType.Size())
		}
	}
	su := stashUnroll(k.Vec, size)
	b.WriteString("    // The row's inputs that reductions read, copied once into shared memory.\n")
	fmt.Fprintf(&b, "    #define SU %d\n", su)
	if k.Cluster > 1 {
		b.WriteString("    #define SIDX(j0, v) ((v) * (chunk / VEC) + ((j0) - jlo) / VEC)\n")
		b.WriteString("    const long long stash_n = chunk;\n")
	} else {
		b.WriteString("    #define SIDX(j0, v) ((v) * (stash_n / VEC) + ((j0) - jlo) / VEC)\n")
		b.WriteString("    const long long stash_n = (R + SHIFTED * (VEC - 1) + VEC - 1) / VEC * VEC;\n")
	}
	b.WriteString("    unsigned char* stash_at = stash_raw;\n")
	for i, h := range held {
		if h {
			T := storageC(k.Inputs[i].DType)
			fmt.Fprintf(&b, "    %s* stash%d = (%[1]s*)stash_at;\n    stash_at += (stash_n * sizeof(%[1]s) + 15) & ~15ll;\n", T, i)
		}
	}
	b.WriteString("    (void)stash_at;\n")
	fmt.Fprintf(&b, "    for (%[1]s jb = jlo + (%[1]s)tid * VEC; jb < jhi; jb += (%[1]s)THREADS * VEC * SU) {\n", J)
	for i, h := range held {
		if h {
			fmt.Fprintf(&b, "      %s l%d[SU * VEC];\n", storageC(k.Inputs[i].DType), i)
		}
	}
	fmt.Fprintf(&b, "      #pragma unroll\n      for (int u = 0; u < SU; u++) {\n        const %[1]s j0 = jb + (%[1]s)u * THREADS * VEC;\n        if (j0 < jhi) {\n", J)
	// Load in storage type: the stash holds what global memory holds.
	for i, h := range held {
		if !h {
			continue
		}
		T := storageC(k.Inputs[i].DType)
		x := fmt.Sprintf("x%d", i)
		switch {
		case k.Inputs[i].Access == RowContig && k.Vec > 1:
			fmt.Fprintf(&b, "          { const VN<%s, VEC> q = *(const VN<%[1]s, VEC>*)(%s + base[%d] + j0);\n", T, x, i)
			fmt.Fprintf(&b, "            for (int v = 0; v < VEC; v++) l%d[u * VEC + v] = q.v[v]; }\n", i)
		case k.Inputs[i].Access == RowContig:
			fmt.Fprintf(&b, "          l%d[u] = %s[base[%d] + j0];\n", i, x, i)
		default:
			fmt.Fprintf(&b, "          for (int v = 0; v < VEC; v++) if (COL_OK(j0 + v)) l%d[u * VEC + v] = %s[base[%d] + (j0 + v) * g.istride[%d]];\n", i, x, i, i)
		}
	}
	b.WriteString("        }\n      }\n")
	fmt.Fprintf(&b, "      #pragma unroll\n      for (int u = 0; u < SU; u++) {\n        const %[1]s j0 = jb + (%[1]s)u * THREADS * VEC;\n        if (j0 < jhi) {\n", J)
	for i, h := range held {
		if h {
			fmt.Fprintf(&b, "          for (int v = 0; v < VEC; v++) stash%d[SIDX(j0, v)] = l%d[u * VEC + v];\n", i, i)
		}
	}
	b.WriteString("        }\n      }\n    }\n")
	return b.String()
}

// clusterAllreduce is, for a kernel whose rows a cluster of c blocks
// shares, the function that combines each block's reduced value: every
// block leaves its value in its shared memory, and after a cluster
// barrier every thread combines the c values in rank order (so results
// repeat exactly); a second barrier keeps the values alive until read.
func clusterAllreduce(c int) string {
	if c <= 1 {
		return ""
	}
	return `
__device__ __forceinline__ float ld_cluster(unsigned a, float) { float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory"); return v; }
__device__ __forceinline__ double ld_cluster(unsigned a, double) { double v; asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(a) : "memory"); return v; }

// cluster_allreduce combines the value v of each block of the cluster
// (every thread of a block holds its block's) with c, in rank order.
template <typename T, typename C> __device__ __forceinline__ T cluster_allreduce(T v, C c) {
  __shared__ T mine[1];
  if (threadIdx.x == 0) mine[0] = v;
  // The value is visible to the cluster: a fence at cluster scope, then a
  // barrier without one of its own.
  asm volatile("fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  unsigned base;
  asm("{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }" : "=r"(base) : "l"(mine));
  T r = v;
  #pragma unroll
  for (int s = 0; s < CLUSTER; s++) {
    unsigned a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(base), "r"(s));
    const T p = ld_cluster(a, T());
    r = s == 0 ? p : c(r, p);
  }
  // Keep this block's value alive until the cluster has read it.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  return r;
}
`
}

// uses reports whether e reads Arg(i).
func uses(e *ir.Expr, i int) bool {
	seen := map[*ir.Expr]bool{}
	var walk func(e *ir.Expr) bool
	walk = func(e *ir.Expr) bool {
		if e == nil || seen[e] {
			return false
		}
		seen[e] = true
		if e.Prim == ir.PArg && e.Index == i {
			return true
		}
		for _, a := range e.Args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	return walk(e)
}

var argName = regexp.MustCompile(`\bx(\d+)\b`)

// exprDoc prints e for a comment, naming arguments as the kernel's code
// does: x<i> for input i, rv<k> for stage k's value.
func (k *RowKernel) exprDoc(e *ir.Expr) string {
	return argName.ReplaceAllStringFunc(e.String(), func(m string) string {
		i, _ := strconv.Atoi(m[1:])
		if i >= len(k.Inputs) {
			return fmt.Sprintf("rv%d", i-len(k.Inputs))
		}
		return m
	})
}

// noParam is the C of an Expr's params in row and column kernels, which
// have none.
func noParam(int) string { return "0" }

// rootC is the C of the region's root expression per element (elem names
// an element of each leaf), and the kind it yields; kernel names the
// kind of kernel in errors.
func (k *RowKernel) rootC(elem func(int) string, kinds []ir.Kind, kernel string) (string, ir.Kind, error) {
	_, outKind, err := k.Expr.ParamKinds(kinds, k.Compute)
	if err != nil {
		return "", 0, err
	}
	e, err := k.Expr.C(elem, noParam, kinds, k.Compute)
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: root: %w", kernel, k.Label, err)
	}
	return e, outKind, nil
}
