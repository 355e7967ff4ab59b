package ir

import (
	"fmt"
	"sync"
)

// Block is a pointwise expression compiled for evaluation over blocks of
// values on the CPU: one tight loop per primitive per block, no per-element
// dispatch. Kernels load a block of each operand (converted to its kind),
// run the block program, and store the result.
type Block struct {
	code    []instr
	argReg  []int // register of each operand, -1 if unused
	nregs   int
	kinds   []Kind // kind of each register
	consts  []fill // registers holding literals
	params  []fill // registers holding scalar parameters (value = index)
	out     int    // register of the result
	outKind Kind
	fast    bool      // compiled with FastMath
	live    []bool    // registers the code reads or writes (folding drops some)
	frames  sync.Pool // frames PutFrame returned, for GetFrame
}

type instr struct {
	p            Prim
	kind         Kind  // operand kind (for a where: of its values)
	to           Kind  // a cast's target kind
	via          DType // a cast's 16-bit type it rounds through (Expr.Via)
	dst, a, b, c int
	f32          func(d, a []float32, ar around) // a FastMath loop for a float32 unary prim
	ar           around                          // what f32 computes around the prim
}

type fill struct {
	reg   int
	value float64
}

// A BlockOption changes how CompileBlock evaluates an expression.
type BlockOption func(*Block)

// FastMath makes a Block compute the float32 transcendental primitives
// exp, log, tanh and erf (and so sigmoid, SiLU, GELU and the tanh GELU,
// which the registry builds from them) with float32 polynomial
// approximations (fastmath.go) instead of rounding the float64 math
// library's result, two to seven times faster. It applies to values of
// kind F32: float32, and float16 and bfloat16, which compute in float32.
//
// The accuracy contract:
//
//   - exp and log are within 1 ulp of the exact result, erf and tanh
//     within 2 ulps, for every float32 input (checked exhaustively), where
//     the exact path is within 0.5 ulp (+2^-29);
//   - special values are what the exact path gives: NaN propagates,
//     infinities, overflow to +Inf, gradual underflow through the
//     subnormals, -0, and erf and tanh reaching ±1 where float32 rounds to
//     ±1;
//   - an op built from these primitives composes their errors through its
//     own roundings: sigmoid, SiLU and both GELUs stay within 4 ulps of
//     the exact path, except where the GELUs' 1 + erf(…) or 1 + tanh(…)
//     cancels (x < 0), where the difference is bounded by |x|·2^-24
//     instead (erf's or tanh's absolute error scaled by x/2), as
//     TestFastMathBlock checks;
//   - every other primitive, and everything computed in F64 or I64, is the
//     exact path bit for bit; so is any value for which no transcendental
//     is evaluated;
//   - results are deterministic: the same input gives the same bits on
//     every run, whatever the block size or the number of workers.
//
// A FastMath block also folds into each such primitive's loop the scalar
// steps around it that nothing else reads (a negation or a multiplication
// by a literal of its operand, an addition of a literal to its result and
// the reciprocal of that sum), so that sigmoid's 1/(1 + exp(-x)) is one
// loop; each step still rounds as its own loop would, so folding changes
// no bit.
//
// The inductor backend compiles its fused CPU regions with FastMath, as
// PyTorch's inductor compiles fused kernels with fast math functions that
// differ from eager kernels by a few ulps; eager kernels use the exact
// path.
func FastMath() BlockOption { return func(b *Block) { b.fast = true } }

// CompileBlock compiles e for operands loaded in kinds args, computing in
// kind compute (the kind untyped literals take at the root). Without
// options the block computes every primitive exactly as documented in
// prims.go; see FastMath for the one option.
func CompileBlock(e *Expr, args []Kind, compute Kind, opts ...BlockOption) (*Block, error) {
	kinds, err := typeExpr(e, args, compute)
	if err != nil {
		return nil, fmt.Errorf("compiling %v: %w", e, err)
	}
	b := &Block{argReg: make([]int, len(args))}
	for _, o := range opts {
		o(b)
	}
	for i := range b.argReg {
		b.argReg[i] = -1
	}
	regOf := map[*Expr]int{}
	var visit func(e *Expr) int
	visit = func(e *Expr) int {
		if r, ok := regOf[e]; ok {
			return r
		}
		if e.Prim == PArg && b.argReg[e.Index] >= 0 {
			regOf[e] = b.argReg[e.Index]
			return b.argReg[e.Index]
		}
		in := instr{p: e.Prim, a: -1, b: -1, c: -1}
		ops := [3]int{-1, -1, -1}
		for i, a := range e.Args {
			ops[i] = visit(a)
		}
		r := b.nregs
		b.nregs++
		b.kinds = append(b.kinds, kinds[e])
		regOf[e] = r
		switch e.Prim {
		case PArg:
			b.argReg[e.Index] = r
			return r
		case PConst:
			b.consts = append(b.consts, fill{r, e.Value})
			return r
		case PParam:
			b.params = append(b.params, fill{r, float64(e.Index)})
			return r
		}
		in.dst, in.a, in.b, in.c = r, ops[0], ops[1], ops[2]
		in.kind = kinds[e.Args[0]]
		if e.Prim == PWhere {
			in.kind = kinds[e.Args[1]]
		}
		in.to = e.To
		if e.roundsVia() {
			in.via = e.Via
		}
		if b.fast && in.kind == F32 {
			in.f32, in.ar = fastLoops[e.Prim], noAround
		}
		b.code = append(b.code, in)
		return r
	}
	b.out = visit(e)
	b.outKind = kinds[e]
	if b.fast {
		b.foldAround()
	}
	b.live = make([]bool, b.nregs)
	b.live[b.out] = true
	for _, in := range b.code {
		for _, r := range [...]int{in.dst, in.a, in.b, in.c} {
			if r >= 0 {
				b.live[r] = true
			}
		}
	}
	return b, nil
}

// foldAround folds into each FastMath loop the scalar primitives around it
// that only it uses: a negation or a multiplication by a literal of its
// operand, then an addition of a literal to its result and a reciprocal of
// that sum. Sigmoid, 1/(1 + exp(-x)), becomes one loop, as does the
// 1 + erf(x·√½) of GELU. The loops round each folded step as its own loop
// would, so folding changes no value.
func (b *Block) foldAround() {
	def := make([]int, b.nregs) // the instruction that computes each register
	uses := make([]int, b.nregs)
	user := make([]int, b.nregs) // the last instruction that reads it
	for r := range def {
		def[r], user[r] = -1, -1
	}
	for i, in := range b.code {
		def[in.dst] = i
		for _, r := range [...]int{in.a, in.b, in.c} {
			if r >= 0 {
				uses[r]++
				user[r] = i
			}
		}
	}
	uses[b.out]++ // the result is read by the caller
	literal := func(r int) (float32, bool) {
		for _, c := range b.consts {
			if c.reg == r {
				return float32(c.value), true
			}
		}
		return 0, false
	}
	// scalarOp reports whether instruction i is p on F32 values with one
	// operand the register r and the other a literal, which it returns.
	scalarOp := func(i int, p Prim, r int) (float32, bool) {
		in := b.code[i]
		if in.p != p || in.kind != F32 {
			return 0, false
		}
		switch r {
		case in.a:
			return literal(in.b)
		case in.b:
			return literal(in.a)
		}
		return 0, false
	}
	dead := make([]bool, len(b.code))
	for i := range b.code {
		in := b.code[i]
		if in.f32 == nil || dead[i] || in.ar != noAround {
			continue
		}
		if j := def[in.a]; j >= 0 && uses[in.a] == 1 {
			switch p := b.code[j]; {
			case p.p == PNeg && p.kind == F32:
				in.ar.pre, in.a, dead[j] = -1, p.a, true
			case p.p == PMul && p.kind == F32:
				if v, ok := literal(p.b); ok {
					in.ar.pre, in.a, dead[j] = v, p.a, true
				} else if v, ok := literal(p.a); ok {
					in.ar.pre, in.a, dead[j] = v, p.b, true
				}
			}
		}
		// The folded loop runs where the last instruction it absorbs ran.
		// (A user u < 0 means the result is the block's.)
		at := i
		if u := user[in.dst]; uses[in.dst] == 1 && u > i && !dead[u] {
			if v, ok := scalarOp(u, PAdd, in.dst); ok {
				in.ar.post, in.dst, dead[u], at = v, b.code[u].dst, true, u
			}
		}
		if u := user[in.dst]; at != i && uses[in.dst] == 1 && u > at && !dead[u] {
			if b.code[u].p == PRecip && b.code[u].kind == F32 {
				in.ar.recip, in.dst, dead[u], at = true, b.code[u].dst, true, u
			}
		}
		dead[i] = at != i
		b.code[at] = in
		dead[at] = false
	}
	code := b.code[:0]
	for i, in := range b.code {
		if !dead[i] {
			code = append(code, in)
		}
	}
	b.code = code
}

// OutKind is the kind of the result.
func (b *Block) OutKind() Kind { return b.outKind }

// Uses reports whether operand i appears in the expression.
func (b *Block) Uses(i int) bool { return b.argReg[i] >= 0 }

// Frame is one goroutine's registers for running a Block over blocks of at
// most Cap values. Make one per worker; it is not safe for concurrent use.
type Frame struct {
	b    *Block
	regs []Vec
	bufs []Vec // buffers owned by the frame, per register
	Cap  int
	// A uniform register holds one value, at index 0, that stands for
	// every element (a literal, a value SetUniform gives, or what the
	// program computes from such values alone); filled is how many copies
	// of it its buffer holds.
	uni    []bool
	filled []int
}

// NewFrame allocates registers for blocks of up to capacity values and fills
// literals and the scalar parameters params.
func (b *Block) NewFrame(capacity int, params []float64) *Frame {
	f := &Frame{b: b, regs: make([]Vec, b.nregs), bufs: make([]Vec, b.nregs), Cap: capacity,
		uni: make([]bool, b.nregs), filled: make([]int, b.nregs)}
	isArg := make([]bool, b.nregs)
	for _, r := range b.argReg {
		if r >= 0 {
			isArg[r] = true
		}
	}
	for r := range b.nregs {
		if !isArg[r] && b.live[r] {
			f.bufs[r] = NewVec(b.kinds[r], capacity)
			f.regs[r] = f.bufs[r]
		}
	}
	for _, c := range b.consts {
		if b.live[c.reg] {
			f.regs[c.reg].Fill(b.kinds[c.reg], c.value)
			f.uni[c.reg], f.filled[c.reg] = true, capacity
		}
	}
	f.setParams(params)
	return f
}

// setParams fills the registers of the block's scalar parameters with
// params, each standing for all Cap values.
func (f *Frame) setParams(params []float64) {
	b := f.b
	for _, p := range b.params {
		if b.live[p.reg] {
			f.regs[p.reg] = f.bufs[p.reg]
			f.regs[p.reg].Fill(b.kinds[p.reg], params[int(p.value)])
			f.uni[p.reg], f.filled[p.reg] = true, f.Cap
		}
	}
}

// GetFrame is NewFrame, reusing a frame PutFrame returned where one of
// at least capacity values is free: a call over a small tensor then
// allocates no registers.
func (b *Block) GetFrame(capacity int, params []float64) *Frame {
	if f, ok := b.frames.Get().(*Frame); ok && f.Cap >= capacity {
		f.setParams(params)
		return f
	}
	return b.NewFrame(capacity, params)
}

// PutFrame gives f, which its caller no longer uses, to later GetFrames.
// It drops the operands f read (the caller's memory).
func (b *Block) PutFrame(f *Frame) {
	for _, r := range b.argReg {
		if r >= 0 {
			f.regs[r] = f.bufs[r]
		}
	}
	b.frames.Put(f)
}

// NewVec allocates a block of n values of kind k.
func NewVec(k Kind, n int) Vec {
	switch k {
	case F32:
		return Vec{F32: make([]float32, n)}
	case F64:
		return Vec{F64: make([]float64, n)}
	}
	return Vec{I64: make([]int64, n)}
}

// Slice is values [lo, hi) of v, sharing its storage.
func (v Vec) Slice(lo, hi int) Vec {
	switch {
	case v.F32 != nil:
		return Vec{F32: v.F32[lo:hi]}
	case v.F64 != nil:
		return Vec{F64: v.F64[lo:hi]}
	}
	return Vec{I64: v.I64[lo:hi]}
}

// Fill sets every value of v, of kind k, to x (converted to the kind).
func (v *Vec) Fill(k Kind, x float64) {
	switch k {
	case F32:
		for i := range v.F32 {
			v.F32[i] = float32(x)
		}
	case F64:
		for i := range v.F64 {
			v.F64[i] = x
		}
	default:
		for i := range v.I64 {
			v.I64[i] = int64(x)
		}
	}
}

// ArgKind is the kind operand i must be loaded in.
func (f *Frame) ArgKind(i int) Kind { return f.b.kinds[f.b.argReg[i]] }

// SetArg makes operand i read from v (which the caller owns) for the next
// Run; v must hold at least as many values as that Run's n. Operands the
// expression does not use are ignored.
func (f *Frame) SetArg(i int, v Vec) {
	if r := f.b.argReg[i]; r >= 0 {
		f.regs[r], f.uni[r] = v, false
	}
}

// SetUniform makes operand i read v[0] (v is the caller's) as every one of
// its values for the next Runs: a row's statistic, say. The program then
// computes with the one value where it can instead of a block of copies.
func (f *Frame) SetUniform(i int, v Vec) {
	if r := f.b.argReg[i]; r >= 0 {
		f.regs[r], f.uni[r], f.filled[r] = v, true, 0
	}
}

// ArgBuf returns a buffer of Cap values, owned by the frame, in which the
// caller may load operand i; pass it to SetArg.
func (f *Frame) ArgBuf(i int) Vec {
	r := f.b.argReg[i]
	if f.bufs[r].F32 == nil && f.bufs[r].F64 == nil && f.bufs[r].I64 == nil {
		f.bufs[r] = NewVec(f.b.kinds[r], f.Cap)
	}
	return f.bufs[r]
}

// Run evaluates the block program over n values (n <= Cap). If dst is not
// nil and the expression computes anything, the result is written into dst;
// the returned Vec holds the result either way (it may alias an operand or a
// register, valid until the next Run).
func (f *Frame) Run(n int, dst *Vec) Vec {
	code := f.b.code
	if len(code) == 0 {
		return f.spread(f.b.out, n, nil)
	}
	for i := range code {
		in := &code[i]
		ua, ub, uc := f.isUniform(in.a), f.isUniform(in.b), f.isUniform(in.c)
		if ua && (in.b < 0 || ub) && (in.c < 0 || uc) {
			// Only uniform operands: the result is one value too.
			d := &f.bufs[in.dst]
			f.regs[in.dst], f.uni[in.dst], f.filled[in.dst] = *d, true, 1
			f.exec(in, 1, d)
			continue
		}
		d := &f.regs[in.dst]
		if dst != nil && i == len(code)-1 {
			d = dst
		}
		f.uni[in.dst] = false
		if (ua || ub) && f.arithUniform(in, n, d, ua) {
			continue
		}
		for _, r := range [...]int{in.a, in.b, in.c} {
			if f.isUniform(r) {
				f.spread(r, n, nil)
			}
		}
		f.exec(in, n, d)
	}
	if out := f.b.out; f.uni[out] {
		return f.spread(out, n, dst)
	}
	if dst != nil {
		return *dst
	}
	return f.regs[f.b.out]
}

// exec runs one instruction over n values into d.
func (f *Frame) exec(in *instr, n int, d *Vec) {
	var b, c *Vec
	if in.b >= 0 {
		b = &f.regs[in.b]
	}
	if in.c >= 0 {
		c = &f.regs[in.c]
	}
	switch {
	case in.p == PCast && in.via != 0 && in.kind == F32 && in.to == F32:
		roundF32Via(d.F32[:n], f.regs[in.a].F32[:n], in.via)
	case in.p == PCast:
		castVec(d, in.to, &f.regs[in.a], in.kind, n)
		if in.via != 0 {
			roundVia(d, in.to, in.via, n)
		}
	case in.f32 != nil:
		in.f32(d.F32[:n], f.regs[in.a].F32[:n], in.ar)
	case in.kind == F32 && isArith(in.p) && vecF32(in.p, d.F32[:n], f.regs[in.a].F32, b.F32, 0):
	default:
		evalPrim(in.p, in.kind, n, d, &f.regs[in.a], b, c)
	}
}

func (f *Frame) isUniform(r int) bool { return r >= 0 && f.uni[r] }

// spread makes uniform register r hold n copies of its value, in dst when
// dst is not nil, else in its own buffer, and returns them.
func (f *Frame) spread(r, n int, dst *Vec) Vec {
	if !f.uni[r] {
		return f.regs[r]
	}
	k := f.b.kinds[r]
	x := f.regs[r].Slice(0, 1)
	if dst != nil {
		d := dst.Slice(0, n)
		copyFirst(d, x, k)
		spreadFirst(d, k)
		return *dst
	}
	if f.filled[r] >= n {
		return f.regs[r]
	}
	if f.bufs[r].F32 == nil && f.bufs[r].F64 == nil && f.bufs[r].I64 == nil {
		f.bufs[r] = NewVec(k, f.Cap)
	}
	b := f.bufs[r]
	copyFirst(b, x, k) // before the fill reads it: x may be b[0]
	spreadFirst(b.Slice(0, n), k)
	f.regs[r], f.filled[r] = b, n
	return b
}

// Computes reports whether the block runs any primitive (an identity, such
// as a cast, only converts its operand).
func (b *Block) Computes() bool { return len(b.code) > 0 }

// roundVia rounds the n values of d (kind k) to the 16-bit floating type
// via and back, as storing them in a tensor of that type (through float32,
// to nearest even) and loading them would. Float32 values go through the
// slice conversions stores and loads use (vectorised where the processor
// allows), a chunk at a time.
func roundVia(d *Vec, k Kind, via DType, n int) {
	switch k {
	case F32:
		roundF32Via(d.F32[:n], d.F32[:n], via)
	case F64:
		roundWideVia(d.F64[:n], via)
	default: // integers: through float, as a store and load would
		roundWideVia(d.I64[:n], via)
	}
}

// roundWideVia is roundVia of float64 or integer values: each chunk goes
// to float32, through roundF32Via, and back.
func roundWideVia[T float64 | int64](v []T, via DType) {
	var f32 [256]float32
	for lo := 0; lo < len(v); lo += len(f32) {
		w := f32[:min(len(f32), len(v)-lo)]
		for i := range w {
			w[i] = float32(v[lo+i])
		}
		roundF32Via(w, w, via)
		for i, x := range w {
			v[lo+i] = T(x)
		}
	}
}

// roundF32Via sets d to the float32 values of s rounded to the 16-bit
// floating type via and back (the common case of roundVia, without a copy
// first); d may be s.
func roundF32Via(d, s []float32, via DType) {
	var buf [512]uint16
	to16, from16 := F32sToBF16s, BF16sToF32s
	if via == Float16 {
		to16, from16 = F32sToF16s, F16sToF32s
	}
	for lo := 0; lo < len(s); lo += len(buf) {
		h := buf[:min(len(buf), len(s)-lo)]
		to16(h, s[lo:lo+len(h)])
		from16(d[lo:lo+len(h)], h)
	}
}

// castVec converts n values of src (kind from) into dst (kind to).
func castVec(dst *Vec, to Kind, src *Vec, from Kind, n int) {
	switch from {
	case F32:
		castFrom(dst, to, src.F32[:n])
	case F64:
		castFrom(dst, to, src.F64[:n])
	default:
		castFrom(dst, to, src.I64[:n])
	}
}

func castFrom[S number](dst *Vec, to Kind, s []S) {
	switch to {
	case F32:
		convertLoop(dst.F32[:len(s)], s)
	case F64:
		convertLoop(dst.F64[:len(s)], s)
	default:
		convertLoop(dst.I64[:len(s)], s)
	}
}

func convertLoop[D, S number](d []D, s []S) {
	for i := range d {
		d[i] = D(s[i])
	}
}
