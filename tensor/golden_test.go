package tensor

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocompile/internal/stats"

	"gocompile/ir"
)

// PyTorch parity. testdata/golden at the repository root holds inputs and
// PyTorch's outputs for every registry op (across dtypes, odd and
// broadcast shapes, special values) and three small models, written by
// scripts/pytorch_golden.py; manifest.json lists the cases. Each case runs
// here eagerly and through Compile: the compiled result must equal the
// eager one bit for bit, and both must match PyTorch within the case's
// tolerance. Tensors load on the default device, so with
// GOCOMPILE_DEVICE=cuda the same test checks the GPU against PyTorch.
//
// To regenerate the goldens, on a machine with PyTorch 2.x:
//
//	python3 scripts/pytorch_golden.py --out testdata/golden

const goldenDir = "../testdata/golden"

type goldenManifest struct {
	Torch  string       `json:"torch"`
	Ops    []string     `json:"ops"`
	Models []string     `json:"models"`
	Cases  []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name        string      `json:"name"`
	Kind        string      `json:"kind"` // "op" or "model"
	Op          string      `json:"op"`   // registry name or model name
	Inputs      []string    `json:"inputs"`
	InputDTypes []string    `json:"input_dtypes"`
	Output      string      `json:"output"`
	OutputDType string      `json:"output_dtype"`
	OutputShape []int       `json:"output_shape"`
	Attrs       goldenAttrs `json:"attrs"`
	DType       string      `json:"dtype"`
	Tol         struct {
		RTol float64 `json:"rtol"`
		ATol float64 `json:"atol"`
	} `json:"tol"`
	Note string `json:"note"`
	// Grad holds PyTorch's gradients of sum(upstream * output) with
	// respect to the float32 and float64 inputs (nil for the others), for
	// differentiable ops and the models.
	Grad *struct {
		Upstream string    `json:"upstream"`
		Inputs   []*string `json:"inputs"`
	} `json:"grad"`
}

type goldenAttrs struct {
	Dims            []int        `json:"dims"` // reduced dims, a permutation, squeezed dims
	KeepDim         bool         `json:"keepdim"`
	Dim             *int         `json:"dim"` // nil: argmax/argmin over everything
	Dim0            int          `json:"dim0"`
	Dim1            int          `json:"dim1"`
	Start           int          `json:"start"`
	Stop            int          `json:"stop"`
	Step            int          `json:"step"`
	Shape           []int        `json:"shape"`
	NormalizedShape []int        `json:"normalized_shape"`
	Eps             float64      `json:"eps"`
	Correction      float64      `json:"correction"`
	Weight          bool         `json:"weight"`
	Bias            bool         `json:"bias"`
	Scalar          *goldenFloat `json:"scalar"`
	ScalarInt       bool         `json:"scalar_int"`
	Value           *goldenFloat `json:"value"`
	Repeats         []int        `json:"repeats"`
	Pad             []int        `json:"pad"`
	Diagonal        int          `json:"diagonal"`
	Descending      bool         `json:"descending"`
	Causal          bool         `json:"causal"`
	Scale           float64      `json:"scale"`
	Size            []int        `json:"size"`
	Stride          []int        `json:"stride"`
	Offset          int          `json:"offset"`
	Min             *goldenFloat `json:"min"`
	Max             *goldenFloat `json:"max"`
	DType           string       `json:"dtype"`
	Heads           int          `json:"heads"`
	Accumulate      bool         `json:"accumulate"`
	Pre             []goldenPre  `json:"pre"`
}

// goldenPre is a view applied to an input before the op, to give it a
// non-contiguous layout.
type goldenPre struct {
	Input int    `json:"input"`
	Op    string `json:"op"` // "transpose" or "slice"
	Dim0  int    `json:"dim0"`
	Dim1  int    `json:"dim1"`
	Dim   int    `json:"dim"`
	Start int    `json:"start"`
	Stop  int    `json:"stop"`
	Step  int    `json:"step"`
}

// goldenFloat is a number in the manifest; JSON has no inf or nan, so
// those come as the strings "inf", "-inf" and "nan".
type goldenFloat float64

func (f *goldenFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "inf":
			*f = goldenFloat(math.Inf(1))
		case "-inf":
			*f = goldenFloat(math.Inf(-1))
		case "nan":
			*f = goldenFloat(math.NaN())
		default:
			return fmt.Errorf("bad float %q", s)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = goldenFloat(v)
	return nil
}

func (f *goldenFloat) or(def float64) float64 {
	if f == nil {
		return def
	}
	return float64(*f)
}

func goldenDType(name string) (DType, error) {
	for _, d := range ir.DTypes {
		if d.String() == name {
			return d, nil
		}
	}
	return ir.Invalid, fmt.Errorf("unknown dtype %q", name)
}

func loadGoldenManifest(t *testing.T) *goldenManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	if os.IsNotExist(err) {
		t.Skip("no PyTorch goldens: generate them on a machine with PyTorch 2.x with " +
			"`python3 scripts/pytorch_golden.py --out testdata/golden` (from the repository root)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var m goldenManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return &m
}

// loadGoldenInputs reads a case's inputs, casts each to its dtype (bfloat16
// is stored as float32) and applies the case's pre-views.
func loadGoldenInputs(c *goldenCase) ([]*Tensor, error) {
	ins, err := loadGoldenRaw(c)
	if err != nil {
		return nil, err
	}
	return applyGoldenPre(c, ins)
}

// loadGoldenRaw loads a case's inputs, before its pre-views.
func loadGoldenRaw(c *goldenCase) ([]*Tensor, error) {
	if len(c.Inputs) != len(c.InputDTypes) {
		return nil, fmt.Errorf("%d inputs, %d input dtypes", len(c.Inputs), len(c.InputDTypes))
	}
	ins := make([]*Tensor, len(c.Inputs))
	for i, f := range c.Inputs {
		x, err := LoadNPY(filepath.Join(goldenDir, f))
		if err != nil {
			return nil, err
		}
		dt, err := goldenDType(c.InputDTypes[i])
		if err != nil {
			return nil, err
		}
		ins[i] = x.To(dt)
	}
	return ins, nil
}

// applyGoldenPre applies a case's pre-views to its inputs.
func applyGoldenPre(c *goldenCase, ins []*Tensor) ([]*Tensor, error) {
	ins = slices.Clone(ins)
	for _, p := range c.Attrs.Pre {
		if p.Input < 0 || p.Input >= len(ins) {
			return nil, fmt.Errorf("pre-view of input %d", p.Input)
		}
		switch p.Op {
		case "transpose":
			ins[p.Input] = ins[p.Input].Transpose(p.Dim0, p.Dim1)
		case "slice":
			ins[p.Input] = ins[p.Input].Slice(p.Dim, p.Start, p.Stop, p.Step)
		default:
			return nil, fmt.Errorf("unknown pre-view %q", p.Op)
		}
	}
	return ins, nil
}

// goldenOp returns the public-API call a case names: registry op name →
// method, with the case's attrs.
func goldenOp(c *goldenCase) (func(in []*Tensor) *Tensor, error) {
	a := c.Attrs
	dim := 0
	if a.Dim != nil {
		dim = *a.Dim
	}
	if c.Kind == "model" {
		m, ok := goldenModels[c.Op]
		if !ok {
			return nil, fmt.Errorf("unknown model %q", c.Op)
		}
		return func(in []*Tensor) *Tensor { return m(in, a) }, nil
	}
	binary := map[string]func(x, y *Tensor) *Tensor{
		"add": (*Tensor).Add, "sub": (*Tensor).Sub, "mul": (*Tensor).Mul, "div": (*Tensor).Div, "pow": (*Tensor).Pow,
		"maximum": (*Tensor).Maximum, "minimum": (*Tensor).Minimum,
		"eq": (*Tensor).Eq, "ne": (*Tensor).Ne, "lt": (*Tensor).Lt, "le": (*Tensor).Le, "gt": (*Tensor).Gt, "ge": (*Tensor).Ge,
		"logical_and": (*Tensor).LogicalAnd, "logical_or": (*Tensor).LogicalOr,
		"after": func(x, y *Tensor) *Tensor { return apply(ir.OpAfter, ir.Attrs{}, x, y) },
	}
	scalar := map[string]func(x *Tensor, s float64) *Tensor{
		"add": (*Tensor).AddScalar, "sub": (*Tensor).SubScalar, "mul": (*Tensor).MulScalar, "div": (*Tensor).DivScalar,
		"pow": (*Tensor).PowScalar, "maximum": (*Tensor).MaximumScalar, "minimum": (*Tensor).MinimumScalar,
		"eq": (*Tensor).EqScalar, "ne": (*Tensor).NeScalar, "lt": (*Tensor).LtScalar, "le": (*Tensor).LeScalar,
		"gt": (*Tensor).GtScalar, "ge": (*Tensor).GeScalar,
	}
	unary := map[string]func(x *Tensor) *Tensor{
		"neg": (*Tensor).Neg, "abs": (*Tensor).Abs, "exp": (*Tensor).Exp, "log": (*Tensor).Log, "sqrt": (*Tensor).Sqrt,
		"rsqrt": (*Tensor).Rsqrt, "sin": (*Tensor).Sin, "cos": (*Tensor).Cos, "tanh": (*Tensor).Tanh, "erf": (*Tensor).Erf,
		"floor": (*Tensor).Floor, "ceil": (*Tensor).Ceil, "round": (*Tensor).Round, "sign": (*Tensor).Sign,
		"sigmoid": (*Tensor).Sigmoid, "relu": (*Tensor).ReLU, "gelu": (*Tensor).GELU, "gelu_tanh": (*Tensor).GELUTanh,
		"silu": (*Tensor).SiLU, "logical_not": (*Tensor).LogicalNot, "contiguous": (*Tensor).Contiguous,
	}
	if a.Scalar != nil {
		f, ok := scalar[c.Op]
		if !ok {
			return nil, fmt.Errorf("op %q has no scalar variant", c.Op)
		}
		s := float64(*a.Scalar)
		if isInt := ir.ScalarOf(s).DType == ir.Int64; isInt != a.ScalarInt {
			return nil, fmt.Errorf("scalar %v: Python's int-ness %v, Go's %v (the manifest needs a non-integral float)", s, a.ScalarInt, isInt)
		}
		return func(in []*Tensor) *Tensor { return f(in[0], s) }, nil
	}
	if f, ok := binary[c.Op]; ok {
		return func(in []*Tensor) *Tensor { return f(in[0], in[1]) }, nil
	}
	if f, ok := unary[c.Op]; ok {
		return func(in []*Tensor) *Tensor { return f(in[0]) }, nil
	}
	var optional = func(in []*Tensor, present ...bool) []*Tensor {
		out := make([]*Tensor, len(present))
		k := 1
		for i, p := range present {
			if p {
				out[i] = in[k]
				k++
			}
		}
		return out
	}
	switch c.Op {
	case "where":
		return func(in []*Tensor) *Tensor { return Where(in[0], in[1], in[2]) }, nil
	case "masked_fill":
		v := a.Value.or(0)
		return func(in []*Tensor) *Tensor { return in[0].MaskedFill(in[1], v) }, nil
	case "clamp", "clamp_min", "clamp_max":
		lo, hi := a.Min.or(math.Inf(-1)), a.Max.or(math.Inf(1))
		return func(in []*Tensor) *Tensor { return in[0].Clamp(lo, hi) }, nil
	case "cast":
		dt, err := goldenDType(a.DType)
		if err != nil {
			return nil, err
		}
		return func(in []*Tensor) *Tensor { return in[0].To(dt) }, nil
	case "sum", "mean", "amax", "amin":
		f := map[string][2]func(*Tensor, ...int) *Tensor{
			"sum": {(*Tensor).Sum, (*Tensor).SumKeepDim}, "mean": {(*Tensor).Mean, (*Tensor).MeanKeepDim},
			"amax": {(*Tensor).Max, (*Tensor).MaxKeepDim}, "amin": {(*Tensor).Min, (*Tensor).MinKeepDim},
		}[c.Op]
		red := f[0]
		if a.KeepDim {
			red = f[1]
		}
		return func(in []*Tensor) *Tensor { return red(in[0], a.Dims...) }, nil
	case "argmax", "argmin":
		arg, all := (*Tensor).ArgMax, (*Tensor).ArgMaxAll
		if c.Op == "argmin" {
			arg, all = (*Tensor).ArgMin, (*Tensor).ArgMinAll
		}
		if a.Dim == nil {
			if a.KeepDim {
				return nil, fmt.Errorf("keepdim over all dims has no Go method")
			}
			return func(in []*Tensor) *Tensor { return all(in[0]) }, nil
		}
		return func(in []*Tensor) *Tensor { return arg(in[0], dim, a.KeepDim) }, nil
	case "var":
		return func(in []*Tensor) *Tensor { return in[0].Var(a.Dims, a.Correction, a.KeepDim) }, nil
	case "softmax":
		return func(in []*Tensor) *Tensor { return in[0].Softmax(dim) }, nil
	case "log_softmax":
		return func(in []*Tensor) *Tensor { return in[0].LogSoftmax(dim) }, nil
	case "cumsum":
		return func(in []*Tensor) *Tensor { return in[0].CumSum(dim) }, nil
	case "scaled_dot_product_attention", "attention": // attention: the few-query shapes it lowers to one kernel for
		return func(in []*Tensor) *Tensor {
			var mask *Tensor
			if len(in) > 3 {
				mask = in[3]
			}
			return ScaledDotProductAttention(in[0], in[1], in[2], mask, a.Causal, a.Scale)
		}, nil
	case "as_strided":
		return func(in []*Tensor) *Tensor { return in[0].AsStrided(a.Size, a.Stride, a.Offset) }, nil
	case "as_strided_scatter":
		return func(in []*Tensor) *Tensor { return in[0].AsStridedScatter(in[1], a.Size, a.Stride, a.Offset) }, nil
	case "as_strided_index_copy":
		return func(in []*Tensor) *Tensor {
			return in[0].AsStridedIndexCopy(a.Size, a.Stride, a.Offset, dim, in[1], in[2])
		}, nil
	case "index_copy":
		return func(in []*Tensor) *Tensor { return in[0].IndexCopy(dim, in[1], in[2]) }, nil
	case "index_add":
		return func(in []*Tensor) *Tensor { return in[0].IndexAdd(dim, in[1], in[2]) }, nil
	case "argsort":
		return func(in []*Tensor) *Tensor { return in[0].ArgSort(dim, a.Descending) }, nil
	case "tril":
		return func(in []*Tensor) *Tensor { return in[0].Tril(a.Diagonal) }, nil
	case "triu":
		return func(in []*Tensor) *Tensor { return in[0].Triu(a.Diagonal) }, nil
	case "repeat":
		return func(in []*Tensor) *Tensor { return in[0].Repeat(a.Repeats...) }, nil
	case "pad":
		return func(in []*Tensor) *Tensor { return in[0].Pad(a.Pad, float64(*a.Value)) }, nil
	case "layer_norm":
		return func(in []*Tensor) *Tensor {
			p := optional(in, a.Weight, a.Bias)
			return in[0].LayerNorm(a.NormalizedShape, p[0], p[1], a.Eps)
		}, nil
	case "rms_norm":
		return func(in []*Tensor) *Tensor {
			return in[0].RMSNorm(a.NormalizedShape, optional(in, a.Weight)[0], a.Eps)
		}, nil
	case "linear":
		return func(in []*Tensor) *Tensor {
			var b *Tensor
			if a.Bias {
				b = in[2]
			}
			return in[0].Linear(in[1], b)
		}, nil
	case "reshape":
		return func(in []*Tensor) *Tensor { return in[0].Reshape(a.Shape...) }, nil
	case "transpose":
		return func(in []*Tensor) *Tensor { return in[0].Transpose(a.Dim0, a.Dim1) }, nil
	case "permute":
		return func(in []*Tensor) *Tensor { return in[0].Permute(a.Dims...) }, nil
	case "expand":
		return func(in []*Tensor) *Tensor { return in[0].Expand(a.Shape...) }, nil
	case "squeeze":
		return func(in []*Tensor) *Tensor { return in[0].Squeeze(a.Dims...) }, nil
	case "unsqueeze":
		return func(in []*Tensor) *Tensor { return in[0].Unsqueeze(dim) }, nil
	case "slice":
		return func(in []*Tensor) *Tensor { return in[0].Slice(dim, a.Start, a.Stop, a.Step) }, nil
	case "matmul":
		return func(in []*Tensor) *Tensor { return in[0].MatMul(in[1]) }, nil
	case "cat":
		return func(in []*Tensor) *Tensor { return Cat(in, dim) }, nil
	case "stack":
		return func(in []*Tensor) *Tensor { return Stack(in, dim) }, nil
	case "gather":
		return func(in []*Tensor) *Tensor { return in[0].Gather(dim, in[1]) }, nil
	case "index_select":
		return func(in []*Tensor) *Tensor { return in[0].IndexSelect(dim, in[1]) }, nil
	case "embedding":
		return func(in []*Tensor) *Tensor { return Embedding(in[0], in[1]) }, nil
	}
	return nil, fmt.Errorf("no Go call for op %q: add one to goldenOp", c.Op)
}

// goldenValues returns a tensor's elements as float64 (exact for every
// dtype but int64 beyond 2^53, which the goldens do not hold) and, for
// integer tensors, as int64.
func goldenValues(x *Tensor) ([]float64, []int64) {
	if x.DType().IsInt() {
		return x.Float64s(), x.Int64s()
	}
	return x.Float64s(), nil
}

// goldenClose checks got against PyTorch's output: dtype, shape, and
// |got - want| <= atol + rtol*|want| elementwise (NaN matches NaN,
// infinities must match exactly). It reports up to three elements.
func goldenClose(c *goldenCase, got, want *Tensor) error {
	dt, err := goldenDType(c.OutputDType)
	if err != nil {
		return err
	}
	if got.DType() != dt {
		return fmt.Errorf("dtype %v, PyTorch gives %v", got.DType(), dt)
	}
	if !slices.Equal(got.Shape(), c.OutputShape) || !slices.Equal(want.Shape(), c.OutputShape) {
		return fmt.Errorf("shape %v, PyTorch gives %v (out.npy holds %v)", got.Shape(), c.OutputShape, want.Shape())
	}
	g, gi := goldenValues(got)
	w, _ := goldenValues(want.To(dt))
	var bad []string
	worst := 0.0
	for i := range w {
		ok := false
		switch {
		case math.IsNaN(w[i]) || math.IsNaN(g[i]):
			ok = math.IsNaN(w[i]) && math.IsNaN(g[i])
		case math.IsInf(w[i], 0) || math.IsInf(g[i], 0):
			ok = g[i] == w[i]
		case gi != nil:
			ok = gi[i] == int64(w[i])
		default:
			d := math.Abs(g[i] - w[i])
			ok = d <= c.Tol.ATol+c.Tol.RTol*math.Abs(w[i])
			worst = max(worst, d/(c.Tol.ATol+c.Tol.RTol*math.Abs(w[i])+1e-300))
		}
		if !ok {
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("element %d (of %v) is %v, PyTorch %v", i, want.Shape(), g[i], w[i]))
			} else if len(bad) == 3 {
				bad = append(bad, "…")
			}
		}
	}
	if bad != nil {
		return fmt.Errorf("%s (rtol %g, atol %g)", strings.Join(bad, "; "), c.Tol.RTol, c.Tol.ATol)
	}
	return nil
}

// runGoldenCase runs one case eagerly and compiled and checks both.
func runGoldenCase(t *testing.T, c *goldenCase) {
	fn, err := goldenOp(c)
	if err != nil {
		t.Fatal(err)
	}
	var ins []*Tensor
	var want, eagerOut, compiledOut *Tensor
	var loadErr error
	if err := Try(func() {
		if ins, loadErr = loadGoldenInputs(c); loadErr == nil {
			want, loadErr = LoadNPY(filepath.Join(goldenDir, c.Output))
		}
	}); err != nil {
		t.Fatalf("loading: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("loading: %v", loadErr)
	}
	if err := Try(func() { eagerOut = fn(ins) }); err != nil {
		t.Fatalf("eager: %v", err)
	}
	if err := goldenClose(c, eagerOut, want); err != nil {
		t.Errorf("eager vs PyTorch: %v", err)
	}
	if err := Try(func() { compiledOut = Compile(fn)(ins) }); err != nil {
		t.Fatalf("compiled: %v", err)
	}
	// Compiled kernels fuse, so they may round differently from eager
	// ones: both must meet PyTorch's tolerance, and each other's.
	if err := goldenClose(c, compiledOut, want); err != nil {
		t.Errorf("compiled vs PyTorch: %v", err)
	}
	if err := goldenClose(c, compiledOut, eagerOut); err != nil {
		t.Errorf("compiled vs eager: %v", err)
	}
	if c.Grad != nil {
		checkGoldenGrad(t, c, fn, false)
		// The first compiled backward recomputes the forward; the second
		// call runs the split graph's halves from saved values.
		compiled := Compile(fn)
		checkGoldenGrad(t, c, compiled, true)
		checkGoldenGrad(t, c, compiled, true)
	}
}

// checkGoldenGrad runs fn on the case's inputs as leaves that require
// gradients, Backward with the case's upstream gradient, and checks each
// leaf's gradient against PyTorch's at the case's tolerance.
func checkGoldenGrad(t *testing.T, c *goldenCase, fn func([]*Tensor) *Tensor, compiled bool) {
	t.Helper()
	what := map[bool]string{false: "eager", true: "compiled"}[compiled]
	err := Try(func() {
		raw, err := loadGoldenRaw(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Grad.Inputs) != len(raw) {
			t.Fatalf("%d gradients for %d inputs", len(c.Grad.Inputs), len(raw))
		}
		for i, f := range c.Grad.Inputs {
			if f != nil {
				raw[i].SetRequiresGrad(true)
			}
		}
		ins, err := applyGoldenPre(c, raw)
		if err != nil {
			t.Fatal(err)
		}
		up, err := LoadNPY(filepath.Join(goldenDir, c.Grad.Upstream))
		if err != nil {
			t.Fatal(err)
		}
		out := fn(ins)
		out.Backward(up.To(out.DType()).To(out.Device()))
		for i, f := range c.Grad.Inputs {
			if f == nil {
				continue
			}
			want, err := LoadNPY(filepath.Join(goldenDir, *f))
			if err != nil {
				t.Fatal(err)
			}
			got := raw[i].Grad()
			if got == nil {
				t.Errorf("%s gradient of input %d: none", what, i)
				continue
			}
			gc := *c
			gc.OutputDType, gc.OutputShape = c.InputDTypes[i], raw[i].Shape()
			if err := goldenClose(&gc, got, want); err != nil {
				t.Errorf("%s gradient of input %d vs PyTorch: %v", what, i, err)
			}
		}
	})
	if err != nil {
		t.Errorf("%s gradient: %v", what, err)
	}
}

func TestGoldenPyTorch(t *testing.T) {
	captureLogs(t, "") // Compile's warnings that gradient cases run eagerly
	m := loadGoldenManifest(t)
	t.Logf("%d golden cases from PyTorch %s, on %v", len(m.Cases), m.Torch, DefaultDevice())
	covered, grads := map[string]int{}, map[string]int{}
	partitioned, withGrads := stats.PartitionedBackwards.Load(), 0
	for i := range m.Cases {
		c := &m.Cases[i]
		if c.Kind == "op" {
			if _, ok := ir.Lookup(c.Op); !ok {
				t.Errorf("case %s: op %q is not in the registry", c.Name, c.Op)
			}
			covered[c.Op]++
			if c.Grad != nil {
				grads[c.Op]++
			}
		}
		if c.Grad != nil {
			withGrads++
		}
		t.Run(c.Name, func(t *testing.T) { runGoldenCase(t, c) })
	}
	// Every gradient case's second compiled call ran the split graph,
	// but those whose trace breaks or runs eagerly.
	t.Logf("%d of %d gradient cases ran their second compiled backward from saved values",
		stats.PartitionedBackwards.Load()-partitioned, withGrads)
	for _, op := range ir.Ops() {
		if op.Differentiable() && grads[op.Name] == 0 {
			t.Errorf("differentiable registry op %q has no PyTorch gradient case: add it to GRAD_OPS in scripts/pytorch_golden.py and regenerate", op.Name)
		}
		if covered[op.Name] == 0 {
			t.Errorf("registry op %q has no PyTorch golden case: add cases to scripts/pytorch_golden.py (and its OPS list), "+
				"regenerate testdata/golden, and map the op to its method in goldenOp", op.Name)
		}
	}
}

// Every registry op needs a golden case, whether or not goldens are
// present here: the script's OPS list must name it.
func TestGoldenScriptCoversRegistry(t *testing.T) {
	b, err := os.ReadFile("../scripts/pytorch_golden.py")
	if err != nil {
		t.Skipf("no golden script: %v", err)
	}
	src := string(b)
	start := strings.Index(src, "\nOPS = [")
	end := strings.Index(src[max(start, 0):], "\n]")
	if start < 0 || end < 0 {
		t.Fatal("scripts/pytorch_golden.py has no OPS = [...] list")
	}
	list := src[start : start+end]
	for _, op := range ir.Ops() {
		if !strings.Contains(list, `"`+op.Name+`"`) {
			t.Errorf("registry op %q is missing from OPS in scripts/pytorch_golden.py: add it with golden cases", op.Name)
		}
	}
}
