package guard

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"gocompile/ir"
)

// tm is a contiguous CPU tensor of the given dtype and shape.
func tm(dt ir.DType, shape ...int) TensorMeta {
	m := TensorMeta{DType: dt, Device: ir.CPU, Contiguous: true}
	m.SetShape(shape)
	return m
}

func call(ts []TensorMeta, sc ...float64) *Call { return &Call{Tensors: ts, Scalars: sc} }

// clone copies c so table cases can mutate it.
func clone(c *Call) *Call {
	return &Call{Tensors: append([]TensorMeta(nil), c.Tensors...), Scalars: append([]float64(nil), c.Scalars...),
		Structure: append([]int(nil), c.Structure...)}
}

// checkConsistent verifies that Why is empty exactly when Check passes.
func checkConsistent(t *testing.T, e *Entry, c *Call) (bool, string) {
	t.Helper()
	ok, why := e.Check(c), e.Why(c)
	if ok != (why == "") {
		t.Fatalf("Check = %v but Why = %q", ok, why)
	}
	return ok, why
}

func TestStaticGuards(t *testing.T) {
	y := tm(ir.Float16, 4, 8, 16)
	y.Device, y.Contiguous = ir.CUDA(0), false
	base := call([]TensorMeta{tm(ir.Float32, 32, 1024), y}, 0.25)
	base.Structure = []int{1, 1}
	e := NewEntry(*base, Policy{})
	cases := []struct {
		name string
		mut  func(c *Call)
		why  string // "" for a hit
	}{
		{"same", func(c *Call) {}, ""},
		{"dim", func(c *Call) { c.Tensors[0].Shape[0] = 64 }, "tensor 0 dim 0: size 64, expected 32"},
		{"last dim", func(c *Call) { c.Tensors[1].Shape[2] = 17 }, "tensor 1 dim 2: size 17, expected 16"},
		{"dtype", func(c *Call) { c.Tensors[1].DType = ir.Float32 }, "tensor 1: dtype float32, expected float16"},
		{"device type", func(c *Call) { c.Tensors[1].Device = ir.CPU }, "tensor 1: device cpu, expected cuda:0"},
		{"device index", func(c *Call) { c.Tensors[1].Device = ir.CUDA(1) }, "tensor 1: device cuda:1, expected cuda:0"},
		{"rank", func(c *Call) { c.Tensors[0].SetShape([]int{32, 1024, 1}) }, "tensor 0: rank 3, expected 2"},
		{"contiguity", func(c *Call) { c.Tensors[1].Contiguous = true }, "tensor 1: contiguous, expected non-contiguous"},
		{"contiguity 2", func(c *Call) { c.Tensors[0].Contiguous = false }, "tensor 0: non-contiguous, expected contiguous"},
		{"scalar", func(c *Call) { c.Scalars[0] = 0.5 }, "scalar 0: 0.5, expected 0.25"},
		{"tensor count", func(c *Call) { c.Tensors = c.Tensors[:1] }, "1 tensor inputs, expected 2"},
		{"scalar count", func(c *Call) { c.Scalars = append(c.Scalars, 1) }, "2 scalar inputs, expected 1"},
		// Two slices of one tensor each, or one slice of both: the same
		// leaves, different arguments.
		{"structure", func(c *Call) { c.Structure = []int{2, 0} }, "argument structure (slice lengths, nil pointers) [2 0], expected [1 1]"},
		{"structure length", func(c *Call) { c.Structure = c.Structure[:1] }, "argument structure (slice lengths, nil pointers) [1], expected [1 1]"},
		{"structure before meta", func(c *Call) { c.Structure[1] = -1; c.Tensors[1].DType = ir.Int64 }, "argument structure (slice lengths, nil pointers) [1 -1], expected [1 1]"},
		{"meta before dims", func(c *Call) { c.Tensors[0].Shape[0] = 1; c.Tensors[1].DType = ir.Int64 }, "tensor 1: dtype int64, expected float16"},
		{"scalars before dims", func(c *Call) { c.Tensors[0].Shape[0] = 1; c.Scalars[0] = 3 }, "scalar 0: 3, expected 0.25"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clone(base)
			tc.mut(c)
			_, why := checkConsistent(t, e, c)
			if why != tc.why {
				t.Errorf("Why = %q, want %q", why, tc.why)
			}
		})
	}
}

func TestScalarsByBits(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		entry, call float64
		hit         bool
	}{
		{0.5, 0.5, true},
		{0.5, 0.25, false},
		{nan, nan, true}, // NaN == NaN for guards
		{nan, 1, false},
		{1, nan, false},
		{0, math.Copysign(0, -1), false}, // 0 and -0 differ
		{math.Inf(1), math.Inf(1), true},
		{math.Inf(1), math.Inf(-1), false},
	}
	for _, tc := range cases {
		e := NewEntry(*call(nil, tc.entry), DefaultPolicy())
		if ok, why := checkConsistent(t, e, call(nil, tc.call)); ok != tc.hit {
			t.Errorf("entry %v, call %v: hit = %v (%s), want %v", tc.entry, tc.call, ok, why, tc.hit)
		}
	}
	e := NewEntry(*call(nil, nan), Policy{})
	if got, want := e.String(), "scalar 0 == NaN"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestDynamicDims(t *testing.T) {
	// x [8, 16], y [8, 32], z [1, 8]: with Dynamic, x0, y0 and z1 share s0
	// (duck sizing), x1 is s1, y1 is s2, z0 stays static at 1.
	base := call([]TensorMeta{tm(ir.Float32, 8, 16), tm(ir.Float32, 8, 32), tm(ir.Float32, 1, 8)})
	e := NewEntry(*base, Policy{Dynamic: true})
	if got, want := e.DynamicDims(), [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("DynamicDims = %v, want %v", got, want)
	}
	if e.NumSymbols() != 3 {
		t.Fatalf("NumSymbols = %d, want 3", e.NumSymbols())
	}
	for _, k := range [][2]int{{0, 0}, {1, 0}, {2, 1}} {
		if s, ok := e.Symbol(k[0], k[1]); !ok || s != 0 {
			t.Errorf("Symbol%v = %d, %v; want s0", k, s, ok)
		}
	}
	if s, ok := e.Symbol(2, 0); ok || s != -1 {
		t.Errorf("Symbol(2, 0) = %d, %v; want static", s, ok)
	}
	if e.SymbolValue(0) != 8 || e.SymbolValue(2) != 32 {
		t.Errorf("SymbolValue = %d, %d", e.SymbolValue(0), e.SymbolValue(2))
	}
	cases := []struct {
		x0, x1, y0, y1, z0, z1 int
		why                    string
	}{
		{8, 16, 8, 32, 1, 8, ""},
		{2, 2, 2, 2, 1, 2, ""},
		{3, 5, 3, 7, 1, 3, ""},
		{1000, 16, 1000, 4096, 1, 1000, ""},
		{1, 16, 1, 32, 1, 1, "tensor 0 dim 0: size 1, dynamic dims need >= 2"},
		{0, 16, 0, 32, 1, 0, "tensor 0 dim 0: size 0, dynamic dims need >= 2"},
		{8, 1, 8, 32, 1, 8, "tensor 0 dim 1: size 1, dynamic dims need >= 2"},
		{4, 16, 8, 32, 1, 4, "tensor 0 dim 0 == tensor 1 dim 0 failed: 4 vs 8"},
		{4, 16, 4, 32, 1, 5, "tensor 0 dim 0 == tensor 2 dim 1 failed: 4 vs 5"},
		{4, 16, 4, 32, 2, 4, "tensor 2 dim 0: size 2, expected 1"},
	}
	for _, tc := range cases {
		c := call([]TensorMeta{tm(ir.Float32, tc.x0, tc.x1), tm(ir.Float32, tc.y0, tc.y1), tm(ir.Float32, tc.z0, tc.z1)})
		if _, why := checkConsistent(t, e, c); why != tc.why {
			t.Errorf("%v: Why = %q, want %q", tc, why, tc.why)
		}
	}
}

func TestMarkedDims(t *testing.T) {
	base := call([]TensorMeta{tm(ir.Float32, 8, 16), tm(ir.Float32, 8, 16), tm(ir.Int64, 1)})
	e := NewEntry(*base, Policy{Marked: map[[2]int]bool{{0, 0}: true, {1, 1}: true, {2, 0}: true}})
	// x0 (8) and y1 (16) get distinct symbols; z0 has size 1 and stays
	// static.
	want := "tensor 0: float32 cpu contiguous [s0, 16]\ntensor 1: float32 cpu contiguous [8, s1]\ntensor 2: int64 cpu contiguous [1]\ns0 >= 2\ns1 >= 2"
	if got := e.String(); got != want {
		t.Fatalf("String =\n%s\nwant\n%s", got, want)
	}
	c := call([]TensorMeta{tm(ir.Float32, 5, 16), tm(ir.Float32, 8, 9), tm(ir.Int64, 1)})
	if ok, why := checkConsistent(t, e, c); !ok {
		t.Errorf("marked dims should accept new sizes: %s", why)
	}
	c.Tensors[0].Shape[1] = 17
	if _, why := checkConsistent(t, e, c); why != "tensor 0 dim 1: size 17, expected 16" {
		t.Errorf("Why = %q", why)
	}
}

func TestAddEquality(t *testing.T) {
	// x [4, 6], y [6, 5], z [7], w [7], all dynamic: x1 and y0 share s1 by
	// duck sizing, as z0 and w0 would; w0 is given its own symbol by hand so
	// that AddEquality has two symbols to merge.
	base := call([]TensorMeta{tm(ir.Float32, 4, 6), tm(ir.Float32, 6, 5), tm(ir.Float32, 7), tm(ir.Float32, 7)})
	mk := func() *Entry {
		e := NewEntry(*base, Policy{Dynamic: true})
		e.tensors[3].dims[0].sym = 99
		e.compile()
		return e
	}
	t.Run("merge", func(t *testing.T) {
		e := mk()
		c := call([]TensorMeta{tm(ir.Float32, 4, 6), tm(ir.Float32, 6, 5), tm(ir.Float32, 3), tm(ir.Float32, 9)})
		if ok, why := checkConsistent(t, e, c); !ok {
			t.Fatalf("before AddEquality distinct symbols should pass: %s", why)
		}
		if err := e.AddEquality(3, 0, 2, 0); err != nil {
			t.Fatal(err)
		}
		if _, why := checkConsistent(t, e, c); why != "tensor 2 dim 0 == tensor 3 dim 0 failed: 3 vs 9" {
			t.Errorf("Why = %q", why)
		}
		c.Tensors[3].Shape[0] = 3
		if ok, why := checkConsistent(t, e, c); !ok {
			t.Errorf("equal sizes should pass: %s", why)
		}
		if e.NumSymbols() != 4 {
			t.Errorf("NumSymbols = %d, want 4", e.NumSymbols())
		}
	})
	t.Run("static specialises", func(t *testing.T) {
		e := NewEntry(*call([]TensorMeta{tm(ir.Float32, 4, 6), tm(ir.Float32, 4, 6)}), Policy{Marked: map[[2]int]bool{{1, 0}: true}})
		if err := e.AddEquality(0, 0, 1, 0); err != nil {
			t.Fatal(err)
		}
		if got := e.DynamicDims(); len(got) != 0 {
			t.Errorf("DynamicDims = %v, want none", got)
		}
		c := call([]TensorMeta{tm(ir.Float32, 4, 6), tm(ir.Float32, 5, 6)})
		if _, why := checkConsistent(t, e, c); why != "tensor 1 dim 0: size 5, expected 4" {
			t.Errorf("Why = %q", why)
		}
	})
	t.Run("errors", func(t *testing.T) {
		e := mk()
		for _, args := range [][4]int{{0, 0, 0, 1}, {4, 0, 0, 0}, {0, 2, 0, 0}, {-1, 0, 0, 0}, {0, 0, 1, -1}} {
			if err := e.AddEquality(args[0], args[1], args[2], args[3]); err == nil {
				t.Errorf("AddEquality%v: no error", args)
			}
		}
		if err := e.AddEquality(0, 1, 1, 0); err != nil { // already equal (one symbol)
			t.Errorf("AddEquality on one symbol: %v", err)
		}
	})
}

func TestSpecialize(t *testing.T) {
	base := call([]TensorMeta{tm(ir.Float32, 8, 16), tm(ir.Float32, 8, 4)})
	e := NewEntry(*base, Policy{Dynamic: true})
	if err := e.Specialize(1, 0); err != nil {
		t.Fatal(err)
	}
	// s0 (x0, y0) is specialised to 8 everywhere; the remaining symbols are
	// renumbered.
	want := "tensor 0: float32 cpu contiguous [8, s0]\ntensor 1: float32 cpu contiguous [8, s1]\ns0 >= 2\ns1 >= 2"
	if got := e.String(); got != want {
		t.Fatalf("String =\n%s\nwant\n%s", got, want)
	}
	c := call([]TensorMeta{tm(ir.Float32, 9, 3), tm(ir.Float32, 8, 5)})
	if _, why := checkConsistent(t, e, c); why != "tensor 0 dim 0: size 9, expected 8" {
		t.Errorf("Why = %q", why)
	}
	if err := e.Specialize(0, 1); err != nil || e.NumSymbols() != 1 {
		t.Errorf("Specialize(0, 1) = %v, NumSymbols %d", err, e.NumSymbols())
	}
	if err := e.Specialize(0, 0); err != nil { // static already
		t.Errorf("Specialize of a static dim: %v", err)
	}
	if err := e.Specialize(2, 0); err == nil {
		t.Error("Specialize(2, 0): no error")
	}

	// Automatic dynamic leaves a specialised dim static: a call that
	// differs in it recompiles a static entry.
	cache := NewCache(DefaultPolicy(), 0)
	x := call([]TensorMeta{tm(ir.Float32, 8, 16)})
	e0, _ := cache.Plan(x)
	if err := e0.Specialize(0, 0); err != nil {
		t.Fatal(err)
	}
	cache.Insert(e0, 0)
	x.Tensors[0].Shape[0] = 12
	e1, r := cache.Plan(x)
	if len(r.DynamicDims) != 0 || len(e1.DynamicDims()) != 0 {
		t.Errorf("specialised dim became dynamic: %v (%s)", r.DynamicDims, r.Text)
	}
}

// sized is the call of TestAutoDynamic: x [batch, 16] float32, y [batch] of dt.
func sized(batch int, dt ir.DType) *Call {
	return call([]TensorMeta{tm(ir.Float32, batch, 16), tm(dt, batch)}, 2)
}

func TestAutoDynamic(t *testing.T) {
	cache := NewCache(DefaultPolicy(), 0)
	compile := func(c *Call, wantText string, wantDyn [][2]int) *Entry {
		t.Helper()
		if _, _, ok := cache.Lookup(c); ok {
			t.Fatalf("unexpected hit")
		}
		e, r := cache.Plan(c)
		if r.LimitReached || e == nil {
			t.Fatalf("limit reached: %s", r.Text)
		}
		if r.Text != wantText {
			t.Errorf("Reason.Text = %q, want %q", r.Text, wantText)
		}
		if !reflect.DeepEqual(r.DynamicDims, wantDyn) {
			t.Errorf("Reason.DynamicDims = %v, want %v", r.DynamicDims, wantDyn)
		}
		cache.Insert(e, cache.Len())
		return e
	}
	hit := func(c *Call, want int) {
		t.Helper()
		_, v, ok := cache.Lookup(c)
		if !ok || v != want {
			t.Errorf("Lookup = %v, %v; want hit of entry %d", v, ok, want)
		}
	}

	e0 := compile(sized(8, ir.Int64), "first call", nil)
	if len(e0.DynamicDims()) != 0 {
		t.Fatalf("first entry not static:\n%v", e0)
	}
	hit(sized(8, ir.Int64), 0)
	e1 := compile(sized(16, ir.Int64),
		"entry 0: tensor 0 dim 0: size 16, expected 8; automatic dynamic: tensor 0 dim 0, tensor 1 dim 0",
		[][2]int{{0, 0}, {1, 0}})
	if got, want := e1.String(), "tensor 0: float32 cpu contiguous [s0, 16]\ntensor 1: int64 cpu contiguous [s0]\ns0 >= 2\nscalar 0 == 2"; got != want {
		t.Errorf("entry 1 =\n%s\nwant\n%s", got, want)
	}
	for _, b := range []int{32, 64, 3, 16, 2} {
		hit(sized(b, ir.Int64), 1)
	}
	hit(sized(8, ir.Int64), 0) // the static entry comes first
	if cache.Recompiles() != 1 {
		t.Errorf("Recompiles = %d, want 1", cache.Recompiles())
	}
	// Batch 1 is specialised: it misses both and gets a static entry.
	compile(sized(1, ir.Int64),
		"entry 0: tensor 0 dim 0: size 1, expected 8; entry 1: tensor 0 dim 0: size 1, dynamic dims need >= 2",
		nil)
	hit(sized(1, ir.Int64), 2)
	// A dtype change recompiles; no entry of that kind exists, so the new
	// entry is static.
	compile(sized(32, ir.Int32),
		"entry 0: tensor 1: dtype int32, expected int64; entry 1: tensor 1: dtype int32, expected int64; entry 2: tensor 1: dtype int32, expected int64",
		nil)
	hit(sized(32, ir.Int32), 3)
	// A new batch for int32 makes its batch dynamic, and the int64 entries
	// stay as they were.
	compile(sized(48, ir.Int32),
		"entry 0: tensor 1: dtype int32, expected int64; entry 1: tensor 1: dtype int32, expected int64; entry 2: tensor 1: dtype int32, expected int64; entry 3: tensor 0 dim 0: size 48, expected 32; automatic dynamic: tensor 0 dim 0, tensor 1 dim 0",
		[][2]int{{0, 0}, {1, 0}})
	hit(sized(5, ir.Int32), 4)
	hit(sized(5, ir.Int64), 1)
	if cache.Recompiles() != 4 || cache.Len() != 5 {
		t.Errorf("Recompiles = %d, Len = %d", cache.Recompiles(), cache.Len())
	}
	// Sizes that break a duck-sized equality recompile with distinct symbols.
	c := call([]TensorMeta{tm(ir.Float32, 6, 16), tm(ir.Int64, 7)}, 2)
	e, r := cache.Plan(c)
	if !strings.Contains(r.Text, "entry 1: tensor 0 dim 0 == tensor 1 dim 0 failed: 6 vs 7") {
		t.Errorf("Reason.Text = %q", r.Text)
	}
	if e.NumSymbols() != 2 || !reflect.DeepEqual(r.DynamicDims, [][2]int{{0, 0}, {1, 0}}) {
		t.Errorf("entry =\n%v", e)
	}
}

func TestAutoDynamicOff(t *testing.T) {
	cache := NewCache(Policy{}, 0)
	for i, b := range []int{8, 16, 32} {
		e, r := cache.Plan(sized(b, ir.Int64))
		if len(r.DynamicDims) != 0 || strings.Contains(r.Text, "automatic") {
			t.Errorf("call %d: dynamic dims %v (%s)", i, r.DynamicDims, r.Text)
		}
		cache.Insert(e, i)
	}
	// Dynamic policy: the first entry is dynamic already.
	cache = NewCache(Policy{Dynamic: true}, 0)
	e, r := cache.Plan(sized(8, ir.Int64))
	if !reflect.DeepEqual(r.DynamicDims, [][2]int{{0, 0}, {0, 1}, {1, 0}}) {
		t.Errorf("DynamicDims = %v\n%v", r.DynamicDims, e)
	}
}

func TestRecompileLimit(t *testing.T) {
	cache := NewCache(DefaultPolicy(), 3)
	if NewCache(Policy{}, 0).Limit() != DefaultLimit {
		t.Error("default limit")
	}
	dts := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	for i, dt := range dts {
		c := call([]TensorMeta{tm(dt, 4)})
		e, r := cache.Plan(c)
		if i < 3 {
			if r.LimitReached || e == nil {
				t.Fatalf("call %d: limit reached early: %s", i, r.Text)
			}
			cache.Insert(e, i)
			continue
		}
		if !r.LimitReached || e != nil {
			t.Fatalf("call %d: LimitReached = %v, entry %v", i, r.LimitReached, e)
		}
		if want := "entry 0: tensor 0: dtype bfloat16, expected float32"; !strings.HasPrefix(r.Text, want) {
			t.Errorf("Text = %q", r.Text)
		}
	}
	if cache.Recompiles() != 2 {
		t.Errorf("Recompiles = %d", cache.Recompiles())
	}
}

func TestString(t *testing.T) {
	x := tm(ir.Float32, 32, 1024)
	y := tm(ir.BFloat16, 32, 7, 1)
	y.Device, y.Contiguous = ir.CUDA(1), false
	z := tm(ir.Bool)
	c := call([]TensorMeta{x, y, z}, 0.5, -3, 1e-5)
	c.Structure = []int{2, -1}
	e := NewEntry(*c,
		Policy{Marked: map[[2]int]bool{{0, 0}: true, {1, 0}: true, {1, 1}: true, {1, 2}: true}})
	want := `tensor 0: float32 cpu contiguous [s0, 1024]
tensor 1: bfloat16 cuda:1 non-contiguous [s0, s1, 1]
tensor 2: bool cpu contiguous []
s0 >= 2
s1 >= 2
scalar 0 == 0.5
scalar 1 == -3
scalar 2 == 1e-05
structure == [2 -1]`
	if got := e.String(); got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
	if got := NewEntry(Call{}, Policy{}).String(); got != "(no guards)" {
		t.Errorf("empty String = %q", got)
	}
}

func TestHighRank(t *testing.T) {
	shape := []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	base := call([]TensorMeta{tm(ir.Float32, shape...)})
	if base.Tensors[0].Rank != 10 || len(base.Tensors[0].Overflow) != 2 || base.Tensors[0].Dim(9) != 11 {
		t.Fatalf("SetShape: %+v", base.Tensors[0])
	}
	e := NewEntry(*base, Policy{Marked: map[[2]int]bool{{0, 9}: true}})
	if !strings.Contains(e.String(), "[2, 3, 4, 5, 6, 7, 8, 9, 10, s0]") {
		t.Errorf("String = %s", e)
	}
	cases := []struct {
		shape []int
		why   string
	}{
		{[]int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, ""},
		{[]int{2, 3, 4, 5, 6, 7, 8, 9, 10, 99}, ""},
		{[]int{2, 3, 4, 5, 6, 7, 8, 9, 12, 11}, "tensor 0 dim 8: size 12, expected 10"},
		{[]int{2, 3, 4, 5, 6, 7, 8, 9, 10, 1}, "tensor 0 dim 9: size 1, dynamic dims need >= 2"},
		{[]int{2, 3, 4, 5, 6, 7, 8, 9, 10}, "tensor 0: rank 9, expected 10"},
	}
	for _, tc := range cases {
		c := call([]TensorMeta{tm(ir.Float32, tc.shape...)})
		if _, why := checkConsistent(t, e, c); why != tc.why {
			t.Errorf("%v: Why = %q, want %q", tc.shape, why, tc.why)
		}
	}
	bad := clone(base)
	bad.Tensors[0].Overflow = bad.Tensors[0].Overflow[:1]
	if _, why := checkConsistent(t, e, bad); why != "tensor 0: rank 10 but 1 overflow sizes, expected 2" {
		t.Errorf("Why = %q", why)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewEntry with a short Overflow did not panic")
		}
	}()
	NewEntry(*bad, Policy{})
}

// four is the benchmark call: four tensors of rank 2-3 and a scalar.
func four(batch int) *Call {
	return call([]TensorMeta{
		tm(ir.Float32, batch, 128, 64),
		tm(ir.Float32, 64, 256),
		tm(ir.Float32, batch, 128),
		tm(ir.Int64, batch, 128, 256),
	}, 1e-5)
}

func TestNoAllocs(t *testing.T) {
	cache := NewCache(DefaultPolicy(), 0)
	for _, b := range []int{1, 8, 16} {
		e, _ := cache.Plan(four(b))
		cache.Insert(e, b)
	}
	c := four(40) // hits the third (dynamic) entry after two misses
	e, _, ok := cache.Lookup(c)
	if !ok {
		t.Fatal("no hit")
	}
	if n := testing.AllocsPerRun(1000, func() { e.Check(c) }); n != 0 {
		t.Errorf("Check: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() { cache.Lookup(c) }); n != 0 {
		t.Errorf("Lookup hit: %v allocs", n)
	}
	miss := four(1)
	miss.Tensors[0].DType = ir.Float64
	if n := testing.AllocsPerRun(1000, func() { cache.Lookup(miss) }); n != 0 {
		t.Errorf("Lookup miss: %v allocs", n)
	}
}

func TestConcurrent(t *testing.T) {
	cache := NewCache(DefaultPolicy(), 1000)
	var mu sync.Mutex // serialises Plan..Insert, as a compiled function does
	var wg sync.WaitGroup
	dts := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64, ir.Bool}
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := call([]TensorMeta{tm(ir.Float32, 4, 4), tm(ir.Float32, 4)}, 0)
			for i := range 200 {
				dt := dts[(g+i)%len(dts)]
				c.Tensors[0].DType = dt
				c.Tensors[0].Shape[0] = 2 + (g*7+i)%5
				c.Scalars[0] = float64(i % 3)
				key := fmt.Sprint(dt, c.Scalars[0])
				e, v, ok := cache.Lookup(c)
				if !ok {
					mu.Lock()
					if e, v, ok = cache.Lookup(c); !ok {
						var r Reason
						e, r = cache.Plan(c)
						if e == nil {
							mu.Unlock()
							t.Errorf("limit: %s", r.Text)
							return
						}
						v = key
						cache.Insert(e, v)
					}
					mu.Unlock()
				}
				if !e.Check(c) || v != key {
					t.Errorf("lookup returned %v for %s", v, key)
					return
				}
			}
		}()
	}
	wg.Wait()
	// 7 dtypes × 3 scalars, each at most static + dynamic.
	if n := cache.Len(); n > 42 || n < 21 {
		t.Errorf("Len = %d", n)
	}
	if len(cache.Entries()) != cache.Len() {
		t.Error("Entries")
	}
}

func BenchmarkCheck4Tensors(b *testing.B) {
	c := four(32)
	e := NewEntry(*c, Policy{Marked: map[[2]int]bool{{0, 0}: true, {2, 0}: true, {3, 0}: true}})
	if !e.Check(c) {
		b.Fatal(e.Why(c))
	}
	b.ReportAllocs()
	for b.Loop() {
		if !e.Check(c) {
			b.Fatal("miss")
		}
	}
}

func BenchmarkLookupHit(b *testing.B) {
	cache := NewCache(DefaultPolicy(), 0)
	for _, n := range []int{8, 16} {
		e, _ := cache.Plan(four(n))
		cache.Insert(e, n)
	}
	c := four(64) // misses the static entry, hits the dynamic one
	if _, _, ok := cache.Lookup(c); !ok {
		b.Fatal("miss")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := cache.Lookup(c); !ok {
			b.Fatal("miss")
		}
	}
}

// Replace swaps a stale entry for its recompilation in place, keeping the
// lookup order and the count, and appends when the old entry is gone.
func TestReplace(t *testing.T) {
	cache := NewCache(DefaultPolicy(), 4)
	c32, c64 := call([]TensorMeta{tm(ir.Float32, 4)}), call([]TensorMeta{tm(ir.Float64, 4)})
	e32, _ := cache.Plan(c32)
	cache.Insert(e32, "old")
	e64, _ := cache.Plan(c64)
	cache.Insert(e64, "f64")
	fresh, _ := cache.Plan(c32)
	cache.Replace(e32, fresh, "new")
	if _, v, _ := cache.Lookup(c32); v != "new" {
		t.Errorf("after Replace, lookup gives %v", v)
	}
	if got := cache.Entries(); len(got) != 2 || got[0] != fresh || got[1] != e64 {
		t.Errorf("entries after Replace: %v", got)
	}
	other, _ := cache.Plan(call([]TensorMeta{tm(ir.Float16, 4)}))
	cache.Replace(e32, other, "f16") // e32 is gone: appended
	if cache.Len() != 3 {
		t.Errorf("Len = %d after replacing a missing entry, want 3", cache.Len())
	}
}
