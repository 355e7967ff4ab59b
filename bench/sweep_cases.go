package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"gocompile/tensor"
)

// The sweep's cases are small programs over the public tensor API, kept as
// data (inputs and steps) so that the Go and PyTorch sides build the same
// program from one JSON case list: Go interprets the steps with tensor
// methods (which is what tracing records, so the compiled graph is that of
// the hand-written expression in Desc), bench/pytorch/sweep.py with torch.

// SweepInput is one argument of a case's program. The program receives
// Storage, a contiguous tensor, viewed through Permute(Perm...) when Perm
// is set (its Shape is then Storage permuted), so permuted layouts reach the
// compiled function as arguments as well as through views inside it.
type SweepInput struct {
	Name    string `json:"name"`
	Shape   []int  `json:"shape"`   // as the program sees it
	Storage []int  `json:"storage"` // the contiguous tensor it views
	Perm    []int  `json:"perm,omitempty"`
	DType   string `json:"dtype"`
}

// SweepStep is one op. Args are value indices: the inputs first, then the
// steps' results in order; the last step's result is the program's output.
type SweepStep struct {
	Op     string   `json:"op"`
	Args   []int    `json:"args"`
	Dims   []int    `json:"dims,omitempty"`   // permute, sum, mean, max, var, layer_norm/rms_norm (normalized shape)
	Dim    *int     `json:"dim,omitempty"`    // argmax, softmax, log_softmax
	Scalar *float64 `json:"scalar,omitempty"` // mul_scalar, add_scalar; var's correction; the norms' eps
}

// SweepCase is one workload of the sweep.
type SweepCase struct {
	ID       string       `json:"id"`
	Category string       `json:"category"`
	DType    string       `json:"dtype"`
	Latency  bool         `json:"latency"` // small inputs: µs per call is the figure
	Desc     string       `json:"desc"`    // the program as Go code
	Note     string       `json:"note"`    // how the generator chose it
	Inputs   []SweepInput `json:"inputs"`
	Steps    []SweepStep  `json:"steps"`
}

// Categories of the sweep, in order, with their share of the default 120
// cases and the prefix of their case ids.
var sweepCategories = []struct {
	name, prefix string
	weight       int
	gen          func(g *caseGen) SweepCase
}{
	{"pointwise-permuted", "perm", 26, (*caseGen).permuted},
	{"pointwise-broadcast", "bcast", 24, (*caseGen).broadcast},
	{"reduce", "reduce", 30, (*caseGen).reduce},
	{"row", "row", 24, (*caseGen).row},
	{"odd", "odd", 16, (*caseGen).odd},
}

// defaultSweepCases is the default -cases.
const defaultSweepCases = 120

const (
	minCaseBytes = 16 << 20 // every input of a non-latency case's main operand is at least this
	maxCaseBytes = 64 << 20
	maxRowLen    = 200000
)

// splitCases divides n cases over the categories by weight (largest
// remainders first), at least one each when n allows.
func splitCases(n int) []int {
	total := 0
	for _, c := range sweepCategories {
		total += c.weight
	}
	counts := make([]int, len(sweepCategories))
	type rem struct {
		i int
		f float64
	}
	var rems []rem
	left := n
	for i, c := range sweepCategories {
		exact := float64(n) * float64(c.weight) / float64(total)
		counts[i] = int(exact)
		left -= counts[i]
		rems = append(rems, rem{i, exact - float64(counts[i])})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.f > b.f:
			return -1
		case a.f < b.f:
			return 1
		}
		return 0
	})
	for j := 0; left > 0; j++ {
		counts[rems[j%len(rems)].i]++
		left--
	}
	// At least one per category: take from the largest.
	for i := range counts {
		if counts[i] == 0 && n >= len(counts) {
			big := 0
			for j := range counts {
				if counts[j] > counts[big] {
					big = j
				}
			}
			counts[big]--
			counts[i]++
		}
	}
	return counts
}

// GenerateSweep returns n cases from seed. Each category draws from its own
// stream of the seed, so case "reduce-004" is the same program whatever n
// is (n only decides how many of each category are taken); quick divides
// the sizes of the non-latency cases by 16.
func GenerateSweep(seed uint64, n int, quick bool) []SweepCase {
	var out []SweepCase
	for i, cat := range sweepCategories {
		g := &caseGen{r: rand.New(rand.NewPCG(seed, uint64(i+1)*0x9e3779b97f4a7c15)), quick: quick}
		for k := range splitCases(n)[i] {
			c := cat.gen(g)
			g.n++
			c.ID = fmt.Sprintf("%s-%03d", cat.prefix, k)
			c.Category = cat.name
			c.Desc = c.program()
			out = append(out, c)
		}
	}
	return out
}

// caseGen draws one category's cases.
type caseGen struct {
	r     *rand.Rand
	quick bool
	c     *SweepCase // the case being built
	n     int        // cases drawn before it: ranks and dim patterns cycle with it
}

func (g *caseGen) chance(p float64) bool { return g.r.Float64() < p }

// dtype draws a case's dtype: float32 most often.
func (g *caseGen) dtype() tensor.DType {
	switch p := g.r.Float64(); {
	case p < 0.6:
		return tensor.Float32
	case p < 0.8:
		return tensor.BFloat16
	}
	return tensor.Float16
}

// targetElems is a main operand's element count: log-uniform between 16
// and 64 MB of dtype dt (1 and 4 MB with -quick).
func (g *caseGen) targetElems(dt tensor.DType) int {
	lo, hi := float64(minCaseBytes), float64(maxCaseBytes)
	b := math.Exp(math.Log(lo) + g.r.Float64()*(math.Log(hi)-math.Log(lo)))
	if g.quick {
		b /= 16
	}
	return int(b) / dt.Size()
}

// minElems is the fewest elements a main operand of dtype dt may have.
func (g *caseGen) minElems(dt tensor.DType) int {
	if g.quick {
		return minCaseBytes / 16 / dt.Size()
	}
	return minCaseBytes / dt.Size()
}

// shape draws a rank-r shape of about n elements (at least n): the log of
// n split at random between the dims, a small dim (2 to 7) a fifth of the
// time, so sizes are rarely powers of two.
func (g *caseGen) shape(r, n int) []int {
	w := make([]float64, r)
	sum := 0.0
	for i := range w {
		w[i] = 0.25 + g.r.Float64()
		sum += w[i]
	}
	s := make([]int, r)
	for i := range s {
		s[i] = max(1, int(math.Round(math.Pow(float64(n), w[i]/sum))))
	}
	if r > 1 && g.chance(0.2) {
		s[g.r.IntN(r)] = 2 + g.r.IntN(6)
	}
	// Grow the largest dim until the numel reaches n.
	big := 0
	for i := range s {
		if s[i] > s[big] {
			big = i
		}
	}
	rest := numel(s) / s[big]
	s[big] = (n + rest - 1) / rest
	return s
}

func numel(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}

// input adds an argument of the given (program-visible) shape, passed as a
// permuted view of a contiguous tensor when perm is set, and returns its
// value index.
func (g *caseGen) input(shape []int, dt tensor.DType, perm []int) int {
	c := g.c
	name := string(rune('a' + len(c.Inputs)))
	in := SweepInput{Name: name, Shape: slices.Clone(shape), Storage: slices.Clone(shape), DType: dt.String()}
	if perm != nil {
		// view = storage.Permute(perm...): view dim i is storage dim perm[i].
		in.Perm = slices.Clone(perm)
		in.Storage = make([]int, len(shape))
		for i, p := range perm {
			in.Storage[p] = shape[i]
		}
	}
	c.Inputs = append(c.Inputs, in)
	return inputRef + len(c.Inputs) - 1
}

// While a case is drawn, inputs and steps interleave: a value is step j, or
// input k as inputRef+k, renumbered by finish.
const inputRef = 1 << 30

// step appends an op and returns its value.
func (g *caseGen) step(s SweepStep) int {
	g.c.Steps = append(g.c.Steps, s)
	return len(g.c.Steps) - 1
}

// finish numbers the values as SweepStep.Args has them (inputs first) and
// returns the case.
func (g *caseGen) finish() SweepCase {
	for i := range g.c.Steps {
		for j, a := range g.c.Steps[i].Args {
			if a >= inputRef {
				g.c.Steps[i].Args[j] = a - inputRef
			} else {
				g.c.Steps[i].Args[j] = a + len(g.c.Inputs)
			}
		}
	}
	return *g.c
}

func ptrInt(v int) *int                    { return &v }
func ptrFloat(v float64) *float64          { return &v }
func (g *caseGen) newCase(dt tensor.DType) { g.c = &SweepCase{DType: dt.String()} }

// A pointwise vocabulary that keeps values of normal inputs far from the
// float16 range's end.
var (
	sweepUnary  = []string{"relu", "gelu", "sigmoid", "tanh", "silu", "neg", "abs"}
	sweepBinary = []string{"add", "sub", "mul", "maximum"}
)

// unaryOrScalar appends an activation or a scalar op to v.
func (g *caseGen) unaryOrScalar(v int) int {
	if g.chance(0.6) {
		return g.step(SweepStep{Op: sweepUnary[g.r.IntN(len(sweepUnary))], Args: []int{v}})
	}
	op := []string{"mul_scalar", "add_scalar"}[g.r.IntN(2)]
	s := []float64{0.5, 1.5, -0.25, 2, 0.125}[g.r.IntN(5)]
	return g.step(SweepStep{Op: op, Args: []int{v}, Scalar: ptrFloat(s)})
}

func (g *caseGen) binary(a, b int) int {
	return g.step(SweepStep{Op: sweepBinary[g.r.IntN(len(sweepBinary))], Args: []int{a, b}})
}

// perm draws a permutation of r dims other than the identity.
func (g *caseGen) perm(r int) []int {
	for {
		p := g.r.Perm(r)
		if !slices.Equal(p, identity(r)) {
			return p
		}
	}
}

func identity(r int) []int {
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	return p
}

func inverse(p []int) []int {
	inv := make([]int, len(p))
	for i, v := range p {
		inv[v] = i
	}
	return inv
}

// permutedOperand returns a value of shape s that is a transposed or
// permuted view of a contiguous tensor: passed as such, or made inside
// the program with Permute (T() for a swap of the last two dims).
func (g *caseGen) permutedOperand(s []int, dt tensor.DType) (int, string) {
	r := len(s)
	p := g.perm(r)
	if g.chance(0.35) {
		return g.input(s, dt, p), fmt.Sprintf("argument permuted %v", p)
	}
	// The program permutes a contiguous tensor of shape s' with s'[p[i]] = s[i].
	st := make([]int, r)
	for i, pi := range p {
		st[pi] = s[i]
	}
	v := g.input(st, dt, nil)
	swapLast := r >= 2 && p[r-1] == r-2 && p[r-2] == r-1
	for i := 0; i < r-2 && swapLast; i++ {
		swapLast = p[i] == i
	}
	if swapLast && g.chance(0.7) {
		return g.step(SweepStep{Op: "t", Args: []int{v}}), "T() in the program"
	}
	return g.step(SweepStep{Op: "permute", Args: []int{v}, Dims: p}), fmt.Sprintf("Permute%v in the program", p)
}

// permuted: 2-D to 5-D, a permuted or transposed operand with one or two
// contiguous ones, 1 to 3 binary ops, sometimes activations.
func (g *caseGen) permuted() SweepCase {
	dt := g.dtype()
	g.newCase(dt)
	r := 2 + g.n%4 // 2-D to 5-D in turn
	s := g.shape(r, g.targetElems(dt))
	x, note := g.permutedOperand(s, dt)
	v := x
	if g.chance(0.3) {
		v = g.unaryOrScalar(v)
	}
	nbin := 1 + g.r.IntN(3)
	for i := range nbin {
		var y int
		if i == 1 && g.chance(0.25) {
			var n2 string
			y, n2 = g.permutedOperand(s, dt)
			note += ", a second operand " + n2
		} else {
			y = g.input(s, dt, nil)
		}
		if g.chance(0.5) {
			v = g.binary(v, y)
		} else {
			v = g.binary(y, v)
		}
		if g.chance(0.35) {
			v = g.unaryOrScalar(v)
		}
	}
	g.c.Note = fmt.Sprintf("rank %d, %s", r, note)
	return g.finish()
}

// broadcast: 2-D to 5-D, operands with size-1 dims (random subsets,
// sometimes fewer leading dims) against a full one, chains of 2 to 4 ops.
func (g *caseGen) broadcast() SweepCase {
	dt := g.dtype()
	g.newCase(dt)
	r := 2 + g.n%4 // 2-D to 5-D in turn
	s := g.shape(r, g.targetElems(dt))
	x := g.input(s, dt, nil)
	var others []int
	var notes []string
	for range 1 + g.r.IntN(2) {
		bs := slices.Clone(s)
		var ones []int
		for len(ones) == 0 || len(ones) == r {
			ones = ones[:0]
			for d := range r {
				if g.chance(0.5) {
					ones = append(ones, d)
				}
			}
		}
		for _, d := range ones {
			bs[d] = 1
		}
		drop := 0
		for drop < r-1 && bs[drop] == 1 && g.chance(0.5) {
			drop++ // a leading size-1 dim may as well be absent
		}
		bs = bs[drop:]
		others = append(others, g.input(bs, dt, nil))
		notes = append(notes, fmt.Sprintf("%v", bs))
	}
	nops := 2 + g.r.IntN(3)
	v := x
	used := 0
	for i := range nops {
		left := nops - i
		if used < len(others) && (left <= len(others)-used || g.chance(0.6)) {
			if g.chance(0.5) {
				v = g.binary(v, others[used])
			} else {
				v = g.binary(others[used], v)
			}
			used++
			continue
		}
		v = g.unaryOrScalar(v)
	}
	g.c.Note = fmt.Sprintf("rank %d, %v against %s", r, s, strings.Join(notes, ", "))
	return g.finish()
}

// reducePatterns are the dim sets reductions take in turn: a pattern's
// dims for a rank-r input (r >= minRank).
var reducePatterns = []struct {
	name    string
	minRank int
	dims    func(g *caseGen, r int) []int
}{
	{"dim 0", 2, func(*caseGen, int) []int { return []int{0} }},
	{"the last dim", 2, func(_ *caseGen, r int) []int { return []int{r - 1} }},
	{"a middle dim", 3, func(g *caseGen, r int) []int { return []int{1 + g.r.IntN(r-2)} }},
	{"dims 0 and 2", 3, func(*caseGen, int) []int { return []int{0, 2} }},
	{"all but the last", 3, func(_ *caseGen, r int) []int { return identity(r - 1) }},
	{"all but the first", 3, func(_ *caseGen, r int) []int { return identity(r)[1:] }},
	{"a random set", 3, func(g *caseGen, r int) []int {
		p := g.r.Perm(r)[:2+g.r.IntN(r-2)]
		slices.Sort(p)
		return p
	}},
}

// reduce: Sum, Mean, Max, Var or ArgMax over a dim set of a 2-D to 4-D
// input, contiguous or permuted, sometimes after a pointwise prologue
// (with a full or broadcast second operand) and before a pointwise
// epilogue.
func (g *caseGen) reduce() SweepCase {
	dt := g.dtype()
	g.newCase(dt)
	pat := reducePatterns[g.n%len(reducePatterns)]
	r := pat.minRank + g.r.IntN(5-pat.minRank) // up to 4-D
	s := g.shape(r, g.targetElems(dt))
	op := []string{"sum", "sum", "mean", "max", "var", "argmax"}[g.r.IntN(6)]
	var x int
	layout := "contiguous"
	if g.chance(0.35) {
		x, layout = g.permutedOperand(s, dt)
	} else {
		x = g.input(s, dt, nil)
	}
	v := x
	var extra []string
	if op != "argmax" && g.chance(0.4) {
		if g.chance(0.5) {
			ys := slices.Clone(s)
			if g.chance(0.5) {
				ys[g.r.IntN(r)] = 1
			}
			y := g.input(ys, dt, nil)
			v = g.step(SweepStep{Op: "mul", Args: []int{v, y}})
			extra = append(extra, fmt.Sprintf("prologue ·%v", ys))
		} else {
			v = g.unaryOrScalar(v)
			extra = append(extra, "prologue "+g.c.Steps[v].Op)
		}
	}
	dims, pname := pat.dims(g, r), pat.name
	switch op {
	case "argmax":
		d := dims[g.r.IntN(len(dims))]
		dims = nil
		pname = fmt.Sprintf("dim %d", d)
		v = g.step(SweepStep{Op: op, Args: []int{v}, Dim: ptrInt(d)})
	case "var":
		v = g.step(SweepStep{Op: op, Args: []int{v}, Dims: dims, Scalar: ptrFloat(1)})
	default:
		v = g.step(SweepStep{Op: op, Args: []int{v}, Dims: dims})
	}
	if op != "argmax" && g.chance(0.3) {
		v = g.unaryOrScalar(v)
		extra = append(extra, "epilogue "+g.c.Steps[v].Op)
	}
	g.c.Note = fmt.Sprintf("%s over %s (%v) of %v, %s", op, pname, dims, s, layout)
	if len(extra) > 0 {
		g.c.Note += ", " + strings.Join(extra, ", ")
	}
	return g.finish()
}

// row: Softmax, LogSoftmax, LayerNorm or RMSNorm over the last dim, rows
// of 1 to 200,000 elements drawn log-uniformly, as many rows as make the
// input 16 to 64 MB (one row at least), as 2-D or 3-D.
func (g *caseGen) row() SweepCase {
	dt := g.dtype()
	g.newCase(dt)
	l := int(math.Round(math.Exp(g.r.Float64() * math.Log(maxRowLen))))
	l = min(max(l, 1), maxRowLen)
	rows := max(1, (g.targetElems(dt)+l-1)/l)
	rows = max(rows, (g.minElems(dt)+l-1)/l)
	s := []int{rows, l}
	if rows >= 8 && g.chance(0.3) {
		b := 2 + g.r.IntN(7)
		s = []int{b, (rows + b - 1) / b, l}
	}
	x := g.input(s, dt, nil)
	last := len(s) - 1
	switch op := []string{"softmax", "log_softmax", "layer_norm", "rms_norm"}[g.r.IntN(4)]; op {
	case "softmax", "log_softmax":
		g.step(SweepStep{Op: op, Args: []int{x}, Dim: ptrInt(last)})
	case "layer_norm":
		w := g.input([]int{l}, dt, nil)
		b := g.input([]int{l}, dt, nil)
		g.step(SweepStep{Op: op, Args: []int{x, w, b}, Dims: []int{l}, Scalar: ptrFloat(1e-5)})
	case "rms_norm":
		w := g.input([]int{l}, dt, nil)
		g.step(SweepStep{Op: op, Args: []int{x, w}, Dims: []int{l}, Scalar: ptrFloat(1e-6)})
	}
	g.c.Note = fmt.Sprintf("%d rows of %d", numel(s)/l, l)
	return g.finish()
}

// isPrime is trial division, for the odd sizes (below 2^32).
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// primeNear is the first prime at or above n.
func primeNear(n int) int {
	for !isPrime(n) {
		n++
	}
	return n
}

// odd: pointwise chains over odd element counts, 1-D and 2-D: primes near
// the 16–64 MB sizes, 4097-wide rows with a prime count; and a latency
// subset with small ones (1, 3, 1023, 4097, primes near 2^16 and one
// million, 33×4097), each with a second operand of the same shape or a
// broadcast row, 2 to 4 ops.
func (g *caseGen) odd() SweepCase {
	dt := g.dtype()
	g.newCase(dt)
	var s []int
	latency := g.chance(0.4)
	if latency {
		switch k := g.r.IntN(7); k {
		case 0, 1, 2, 3:
			s = []int{[]int{1, 3, 1023, 4097}[k]}
		case 4:
			s = []int{primeNear(60000 + g.r.IntN(10000))}
		case 5:
			s = []int{primeNear(1000000 - 50000 + g.r.IntN(100000))}
		case 6:
			s = []int{33, 4097}
		}
	} else {
		n := g.targetElems(dt)
		switch g.r.IntN(3) {
		case 0:
			s = []int{primeNear(n)}
		case 1:
			s = []int{primeNear(n / 4097), 4097}
		case 2:
			c := primeNear(500 + g.r.IntN(3000))
			s = []int{primeNear((n + c - 1) / c), c}
		}
		if numel(s) < g.minElems(dt) {
			s[0] = primeNear(s[0] * 2)
		}
	}
	g.c.Latency = latency
	x := g.input(s, dt, nil)
	var y int
	if len(s) == 2 && g.chance(0.4) {
		y = g.input(s[1:], dt, nil)
	} else {
		y = g.input(s, dt, nil)
	}
	nops := 2 + g.r.IntN(3)
	v := x
	usedY := false
	for i := range nops {
		if !usedY && (i == nops-1 || g.chance(0.5)) {
			v = g.binary(v, y)
			usedY = true
			continue
		}
		v = g.unaryOrScalar(v)
	}
	g.c.Note = fmt.Sprintf("%v", s)
	if latency {
		g.c.Note += ", latency"
	}
	return g.finish()
}

// program writes the case as a Go function body, as a user would.
func (c *SweepCase) program() string {
	names := make([]string, 0, len(c.Inputs)+len(c.Steps))
	for _, in := range c.Inputs {
		names = append(names, in.Name)
	}
	var b strings.Builder
	for i, s := range c.Steps {
		e := "?" + s.Op
		if op, ok := sweepOps[s.Op]; ok {
			a := make([]string, len(s.Args))
			for j, k := range s.Args {
				a[j] = names[k]
			}
			e = op.src(s, a)
		}
		if i == len(c.Steps)-1 {
			fmt.Fprintf(&b, "return %s", e)
			break
		}
		name := "v" + strconv.Itoa(i)
		fmt.Fprintf(&b, "%s := %s; ", name, e)
		names = append(names, name)
	}
	return b.String()
}

// sweepOp is one step op: the tensor API call eval makes, and that call
// as Go source for program.
type sweepOp struct {
	run func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor
	src func(s SweepStep, a []string) string
}

func unaryOp(name string, f func(*tensor.Tensor) *tensor.Tensor) sweepOp {
	return sweepOp{
		func(_ SweepStep, a []*tensor.Tensor) *tensor.Tensor { return f(a[0]) },
		func(_ SweepStep, a []string) string { return a[0] + "." + name + "()" },
	}
}

func binaryOp(name string, f func(x, y *tensor.Tensor) *tensor.Tensor) sweepOp {
	return sweepOp{
		func(_ SweepStep, a []*tensor.Tensor) *tensor.Tensor { return f(a[0], a[1]) },
		func(_ SweepStep, a []string) string { return fmt.Sprintf("%s.%s(%s)", a[0], name, a[1]) },
	}
}

func scalarOp(name string, f func(*tensor.Tensor, float64) *tensor.Tensor) sweepOp {
	return sweepOp{
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return f(a[0], *s.Scalar) },
		func(s SweepStep, a []string) string {
			return fmt.Sprintf("%s.%s(%s)", a[0], name, strconv.FormatFloat(*s.Scalar, 'g', -1, 64))
		},
	}
}

func dimsOp(name string, f func(*tensor.Tensor, ...int) *tensor.Tensor) sweepOp {
	return sweepOp{
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return f(a[0], s.Dims...) },
		func(s SweepStep, a []string) string { return fmt.Sprintf("%s.%s(%s)", a[0], name, ints(s.Dims)) },
	}
}

func dimOp(name string, f func(*tensor.Tensor, int) *tensor.Tensor) sweepOp {
	return sweepOp{
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return f(a[0], *s.Dim) },
		func(s SweepStep, a []string) string { return fmt.Sprintf("%s.%s(%d)", a[0], name, *s.Dim) },
	}
}

// sweepOps is the ops a SweepStep may name.
var sweepOps = map[string]sweepOp{
	"permute":     dimsOp("Permute", (*tensor.Tensor).Permute),
	"t":           unaryOp("T", (*tensor.Tensor).T),
	"add":         binaryOp("Add", (*tensor.Tensor).Add),
	"sub":         binaryOp("Sub", (*tensor.Tensor).Sub),
	"mul":         binaryOp("Mul", (*tensor.Tensor).Mul),
	"maximum":     binaryOp("Maximum", (*tensor.Tensor).Maximum),
	"relu":        unaryOp("ReLU", (*tensor.Tensor).ReLU),
	"gelu":        unaryOp("GELU", (*tensor.Tensor).GELU),
	"sigmoid":     unaryOp("Sigmoid", (*tensor.Tensor).Sigmoid),
	"tanh":        unaryOp("Tanh", (*tensor.Tensor).Tanh),
	"silu":        unaryOp("SiLU", (*tensor.Tensor).SiLU),
	"neg":         unaryOp("Neg", (*tensor.Tensor).Neg),
	"abs":         unaryOp("Abs", (*tensor.Tensor).Abs),
	"mul_scalar":  scalarOp("MulScalar", (*tensor.Tensor).MulScalar),
	"add_scalar":  scalarOp("AddScalar", (*tensor.Tensor).AddScalar),
	"sum":         dimsOp("Sum", (*tensor.Tensor).Sum),
	"mean":        dimsOp("Mean", (*tensor.Tensor).Mean),
	"max":         dimsOp("Max", (*tensor.Tensor).Max),
	"softmax":     dimOp("Softmax", (*tensor.Tensor).Softmax),
	"log_softmax": dimOp("LogSoftmax", (*tensor.Tensor).LogSoftmax),
	"var": {
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return a[0].Var(s.Dims, *s.Scalar, false) },
		func(s SweepStep, a []string) string {
			return fmt.Sprintf("%s.Var([]int{%s}, %g, false)", a[0], ints(s.Dims), *s.Scalar)
		},
	},
	"argmax": {
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return a[0].ArgMax(*s.Dim, false) },
		func(s SweepStep, a []string) string { return fmt.Sprintf("%s.ArgMax(%d, false)", a[0], *s.Dim) },
	},
	"layer_norm": {
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor {
			return a[0].LayerNorm(s.Dims, a[1], a[2], *s.Scalar)
		},
		func(s SweepStep, a []string) string {
			return fmt.Sprintf("%s.LayerNorm([]int{%s}, %s, %s, %g)", a[0], ints(s.Dims), a[1], a[2], *s.Scalar)
		},
	},
	"rms_norm": {
		func(s SweepStep, a []*tensor.Tensor) *tensor.Tensor { return a[0].RMSNorm(s.Dims, a[1], *s.Scalar) },
		func(s SweepStep, a []string) string {
			return fmt.Sprintf("%s.RMSNorm([]int{%s}, %s, %g)", a[0], ints(s.Dims), a[1], *s.Scalar)
		},
	},
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// eval runs the case's program on xs with the tensor API: what the eager
// function does, and what Compile traces.
func (c *SweepCase) eval(xs []*tensor.Tensor) *tensor.Tensor {
	vals := slices.Clone(xs)
	for _, s := range c.Steps {
		op, ok := sweepOps[s.Op]
		if !ok {
			panic(fmt.Sprintf("sweep: unknown op %q", s.Op))
		}
		a := make([]*tensor.Tensor, len(s.Args))
		for j, k := range s.Args {
			a[j] = vals[k]
		}
		vals = append(vals, op.run(s, a))
	}
	return vals[len(vals)-1]
}

// parseDType is the inverse of DType.String for the sweep's dtypes.
func parseDType(s string) (tensor.DType, error) {
	switch s {
	case "float32":
		return tensor.Float32, nil
	case "float16":
		return tensor.Float16, nil
	case "bfloat16":
		return tensor.BFloat16, nil
	case "float64":
		return tensor.Float64, nil
	}
	return 0, fmt.Errorf("sweep: dtype %q", s)
}
