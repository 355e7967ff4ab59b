package ir

import "fmt"

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
}

type instr struct {
	p            Prim
	kind         Kind // operand kind (for a where: of its values)
	to           Kind // a cast's target kind
	dst, a, b, c int
}

type fill struct {
	reg   int
	value float64
}

// CompileBlock compiles e for operands loaded in kinds args, computing in
// kind compute (the kind untyped literals take at the root).
func CompileBlock(e *Expr, args []Kind, compute Kind) (*Block, error) {
	kinds, err := typeExpr(e, args, compute)
	if err != nil {
		return nil, fmt.Errorf("compiling %v: %w", e, err)
	}
	b := &Block{argReg: make([]int, len(args))}
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
		b.code = append(b.code, in)
		return r
	}
	b.out = visit(e)
	b.outKind = kinds[e]
	return b, nil
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
}

// NewFrame allocates registers for blocks of up to capacity values and fills
// literals and the scalar parameters params.
func (b *Block) NewFrame(capacity int, params []float64) *Frame {
	f := &Frame{b: b, regs: make([]Vec, b.nregs), bufs: make([]Vec, b.nregs), Cap: capacity}
	isArg := make([]bool, b.nregs)
	for _, r := range b.argReg {
		if r >= 0 {
			isArg[r] = true
		}
	}
	for r := range b.nregs {
		if !isArg[r] {
			f.bufs[r] = NewVec(b.kinds[r], capacity)
			f.regs[r] = f.bufs[r]
		}
	}
	for _, c := range b.consts {
		f.regs[c.reg].Fill(b.kinds[c.reg], c.value)
	}
	for _, p := range b.params {
		f.regs[p.reg].Fill(b.kinds[p.reg], params[int(p.value)])
	}
	return f
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
		f.regs[r] = v
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
		return f.regs[f.b.out]
	}
	for i := range code {
		in := &code[i]
		d := &f.regs[in.dst]
		if dst != nil && i == len(code)-1 {
			d = dst
		}
		var b, c *Vec
		if in.b >= 0 {
			b = &f.regs[in.b]
		}
		if in.c >= 0 {
			c = &f.regs[in.c]
		}
		if in.p == PCast {
			castVec(d, in.to, &f.regs[in.a], in.kind, n)
			continue
		}
		evalPrim(in.p, in.kind, n, d, &f.regs[in.a], b, c)
	}
	if dst != nil {
		return *dst
	}
	return f.regs[f.b.out]
}

// Computes reports whether the block runs any primitive (an identity, such
// as a cast, only converts its operand).
func (b *Block) Computes() bool { return len(b.code) > 0 }

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
