package tensor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"gocompile/array"
)

// TestHostileInputs feeds every exported entry point of the package inputs
// a careless or hostile caller could pass. Each must be refused the
// documented way: functions that return an error return one, the rest
// panic with an *Error that Try turns into an error. Any other panic (an
// index out of range, a nil dereference, a failed allocation, a reflect
// panic) is a bug: the row fails with the panic value.
func TestHostileInputs(t *testing.T) {
	dev := DefaultDevice() // GOCOMPILE_DEVICE=cuda runs the rows on a GPU
	x := FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	ints := FromSlice([]int64{1, 2, 3})
	bools := FromSlice([]bool{true, false, true})
	empty := Zeros(Float32, 0, 3)
	var nilT *Tensor
	zero := &Tensor{} // not made by this package: no storage
	// A tensor that only claims to be on GPU 7: devices are compared before
	// any storage is read, so it shows device errors on any machine.
	onGPU := &Tensor{v: array.Meta(CUDA(7), Float32, []int{2, 3}, []int{3, 1})}
	// Views as large as an int can count, without storage to match.
	wide := Scalar(1, Float32).Expand(1<<40, 1)
	tall := Scalar(1, Float32).Expand(1, 1<<40)
	vast := Scalar(1, Float32).Expand(1<<43, 1)
	var nilGen *Generator

	npyBytes := func() []byte {
		var b bytes.Buffer
		if err := WriteNPY(&b, x); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()
	npyWith := func(dict string) []byte { return npyFile(1, dict, le32(1, 2, 3, 4, 5, 6)) }
	stBytes := func() []byte {
		var b bytes.Buffer
		if err := WriteSafetensors(&b, map[string]*Tensor{"x": x}, nil); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()
	st := func(entry string, data []byte) []byte { return stFile(`{"t":`+entry+`}`, data) }
	missing := filepath.Join(t.TempDir(), "missing")

	// do adapts a func that reports misuse by panicking.
	do := func(f func()) func() error { return func() error { f(); return nil } }
	compile := func(f any) func() error { return do(func() { Compile(f) }) }
	npy := func(b []byte) func() error { return func() error { _, err := ReadNPY(bytes.NewReader(b)); return err } }
	safe := func(b []byte) func() error {
		return func() error { _, _, err := ReadSafetensors(bytes.NewReader(b)); return err }
	}

	tests := []struct {
		name string
		fn   func() error
	}{
		// Creation.
		{"Zeros negative size", do(func() { Zeros(Float32, 2, -1) })},
		{"Zeros numel overflow", do(func() { Zeros(Float32, 1<<40, 1<<40) })},
		{"Zeros numel overflow to small", do(func() { Zeros(Float32, 1<<33, 1<<31+1) })},
		{"Zeros byte size overflow", do(func() { Zeros(Float64, 1<<61) })},
		{"Zeros beyond the address space", do(func() { Zeros(Float32, 1<<50) })},
		{"Zeros invalid dtype", do(func() { Zeros(DType(99), 2) })},
		{"Zeros zero dtype", do(func() { Zeros(DType(0), 2) })},
		{"Ones negative size", do(func() { Ones(Float32, -3) })},
		{"Full numel overflow", do(func() { Full(1, Int64, 1<<32, 1<<32) })},
		{"Full invalid dtype", do(func() { Full(1, DType(200)) })},
		{"Scalar invalid dtype", do(func() { Scalar(1, DType(8)) })},
		{"FromSlice too few values", do(func() { FromSlice([]float32{1, 2, 3}, 2, 2) })},
		{"FromSlice too many values", do(func() { FromSlice([]int{1, 2, 3, 4, 5}, 2, 2) })},
		{"FromSlice negative size", do(func() { FromSlice([]float64{}, 0, -1) })},
		{"FromSlice numel overflow", do(func() { FromSlice([]bool{}, 1<<32, 1<<32) })},
		{"FromSlice overflow to the length", do(func() { FromSlice([]int32{1, 2}, 1<<62, 4, 2) })},
		{"Arange zero step", do(func() { Arange(0, 10, 0, Float32) })},
		{"Arange NaN step", do(func() { Arange(0, 10, math.NaN(), Float32) })},
		{"Arange NaN start", do(func() { Arange(math.NaN(), 10, 1, Float32) })},
		{"Arange NaN end", do(func() { Arange(0, math.NaN(), 1, Float32) })},
		{"Arange infinite end", do(func() { Arange(0, math.Inf(1), 1, Float32) })},
		{"Arange wrong direction", do(func() { Arange(0, 10, -1, Float32) })},
		{"Arange too many values", do(func() { Arange(0, 1e300, 1e-300, Float64) })},
		{"Arange too many values for an int", do(func() { Arange(0, 1e19, 1, Int64) })},
		{"Arange invalid dtype", do(func() { Arange(0, 3, 1, DType(42)) })},
		{"Linspace negative count", do(func() { Linspace(0, 1, -1, Float32) })},
		{"Linspace huge count", do(func() { Linspace(0, 1, 1<<50, Float32) })},
		{"Linspace invalid dtype", do(func() { Linspace(0, 1, 3, DType(0)) })},
		{"Eye negative", do(func() { Eye(Float32, -2) })},
		{"Eye numel overflow", do(func() { Eye(Float32, 1<<32) })},
		{"Eye invalid dtype", do(func() { Eye(DType(77), 2) })},
		{"Rand negative size", do(func() { Rand(1, Float32, -1) })},
		{"Rand numel overflow", do(func() { Rand(1, Float32, 1<<40, 1<<40) })},
		{"Rand huge", do(func() { Rand(1, Float32, 1<<50) })},
		{"Randn negative size", do(func() { Randn(1, Float64, 3, -3) })},
		{"Randn invalid dtype", do(func() { Randn(1, DType(9), 3) })},
		{"RandInt empty range", do(func() { NewGenerator(1).RandInt(5, 5, 3) })},
		{"RandInt negative size", do(func() { NewGenerator(1).RandInt(0, 5, -3) })},
		{"RandInt numel overflow", do(func() { NewGenerator(1).RandInt(0, 5, 1<<40, 1<<40) })},
		{"nil Generator Rand", do(func() { nilGen.Rand(Float32, 2) })},
		{"nil Generator Randn", do(func() { nilGen.Randn(Float32, 2) })},
		{"zero Generator RandInt", do(func() { (&Generator{}).RandInt(0, 2, 2) })},
		{"ZerosLike nil", do(func() { ZerosLike(nilT) })},
		{"OnesLike zero Tensor", do(func() { OnesLike(zero) })},
		{"FullLike nil", do(func() { FullLike(nilT, 2) })},

		// Accessors.
		{"Shape of nil", do(func() { nilT.Shape() })},
		{"Strides of nil", do(func() { nilT.Strides() })},
		{"Offset of nil", do(func() { nilT.Offset() })},
		{"DType of nil", do(func() { nilT.DType() })},
		{"Device of nil", do(func() { nilT.Device() })},
		{"Device of zero Tensor", do(func() { zero.Device() })},
		{"Dim of nil", do(func() { nilT.Dim() })},
		{"Numel of nil", do(func() { nilT.Numel() })},
		{"Size of nil", do(func() { nilT.Size(0) })},
		{"Size out of range", do(func() { x.Size(2) })},
		{"Size far out of range", do(func() { x.Size(math.MinInt) })},
		{"IsContiguous of nil", do(func() { nilT.IsContiguous() })},
		{"SharesStorage of nil", do(func() { nilT.SharesStorage(x) })},
		{"SharesStorage with nil", do(func() { x.SharesStorage(nilT) })},
		{"String of nil", do(func() { _ = nilT.String() })},
		{"String of zero Tensor", do(func() { _ = zero.String() })},

		// Pointwise ops.
		{"Add nil receiver", do(func() { nilT.Add(x) })},
		{"Add nil operand", do(func() { x.Add(nilT) })},
		{"Add zero Tensor", do(func() { zero.Add(x) })},
		{"Mul zero Tensor operand", do(func() { x.Mul(zero) })},
		{"Add not broadcastable", do(func() { x.Add(Zeros(Float32, 2)) })},
		{"Add across devices", do(func() { x.Add(onGPU) })},
		{"Sub of bools", do(func() { bools.Sub(bools) })},
		{"Div not broadcastable", do(func() { x.Div(Zeros(Float32, 4)) })},
		{"Pow nil", do(func() { x.Pow(nilT) })},
		{"Maximum not broadcastable", do(func() { x.Maximum(Zeros(Float32, 3, 2)) })},
		{"Neg of nil", do(func() { nilT.Neg() })},
		{"Neg of bools", do(func() { bools.Neg() })},
		{"Exp of nil", do(func() { nilT.Exp() })},
		{"GELU of ints", do(func() { ints.GELU() })},
		{"SiLU of bools", do(func() { bools.SiLU() })},
		{"AddScalar of nil", do(func() { nilT.AddScalar(1) })},
		{"EqScalar of nil", do(func() { nilT.EqScalar(1) })},
		{"Lt across devices", do(func() { onGPU.Lt(x) })},
		{"LogicalAnd nil", do(func() { bools.LogicalAnd(nilT) })},
		{"LogicalNot zero Tensor", do(func() { zero.LogicalNot() })},
		{"Where nil condition", do(func() { Where(nilT, x, x) })},
		{"Where float condition", do(func() { Where(x, x, x) })},
		{"Where not broadcastable", do(func() { Where(FromSlice([]bool{true, false}), x, x) })},
		{"Clamp of nil", do(func() { nilT.Clamp(0, 1) })},
		{"Clamp of zero Tensor", do(func() { zero.Clamp(math.Inf(-1), math.Inf(1)) })},
		{"MaskedFill of nil", do(func() { nilT.MaskedFill(bools, 0) })},
		{"MaskedFill nil mask", do(func() { x.MaskedFill(nilT, 0) })},
		{"MaskedFill float mask", do(func() { x.MaskedFill(x, 0) })},
		{"To of nil", do(func() { nilT.To(Float32) })},
		{"To invalid dtype", do(func() { x.To(DType(99)) })},
		{"To zero dtype", do(func() { x.To(DType(0)) })},
		{"To nil target", do(func() { x.To(nil) })},
		{"To unknown device type", do(func() { x.To(Device{Type: 9}) })},
		{"To CPU with an index", do(func() { x.To(Device{Type: DeviceCPU, Index: 3}) })},
		{"To negative GPU", do(func() { x.To(CUDA(-1)) })},
		{"ToDevice absent GPU", do(func() { x.ToDevice(CUDA(1 << 20)) })},
		{"ToDevice of nil", do(func() { nilT.ToDevice(CPU) })},

		// Reductions and normalisations.
		{"Sum of nil", do(func() { nilT.Sum() })},
		{"Sum dim out of range", do(func() { x.Sum(2) })},
		{"Sum huge dim", do(func() { x.Sum(1 << 62) })},
		{"Sum repeated dim", do(func() { x.Sum(1, -1) })},
		{"SumKeepDim out of range", do(func() { x.SumKeepDim(-3) })},
		{"Mean of ints", do(func() { ints.Mean() })},
		{"MeanKeepDim out of range", do(func() { x.MeanKeepDim(5) })},
		{"Max of empty", do(func() { empty.Max() })},
		{"Min of empty dim", do(func() { empty.Min(0) })},
		{"MaxKeepDim of nil", do(func() { nilT.MaxKeepDim() })},
		{"ArgMax dim out of range", do(func() { x.ArgMax(2, false) })},
		{"ArgMax of empty", do(func() { empty.ArgMax(0, true) })},
		{"ArgMax of nil", do(func() { nilT.ArgMax(0, false) })},
		{"ArgMin of nil", do(func() { nilT.ArgMin(0, false) })},
		{"ArgMaxAll of nil", do(func() { nilT.ArgMaxAll() })},
		{"ArgMinAll of empty", do(func() { empty.ArgMinAll() })},
		{"Var of ints", do(func() { ints.Var(nil, 1, false) })},
		{"Var dim out of range", do(func() { x.Var([]int{3}, 1, false) })},
		{"Var of nil", do(func() { nilT.Var(nil, 1, false) })},
		{"Softmax dim out of range", do(func() { x.Softmax(2) })},
		{"Softmax of nil", do(func() { nilT.Softmax(0) })},
		{"LogSoftmax of ints", do(func() { ints.LogSoftmax(0) })},
		{"LayerNorm wrong shape", do(func() { x.LayerNorm([]int{2}, nil, nil, 1e-5) })},
		{"LayerNorm empty shape", do(func() { x.LayerNorm(nil, nil, nil, 1e-5) })},
		{"LayerNorm longer shape", do(func() { x.LayerNorm([]int{1, 2, 3}, nil, nil, 1e-5) })},
		{"LayerNorm weight shape", do(func() { x.LayerNorm([]int{3}, Ones(Float32, 2), nil, 1e-5) })},
		{"LayerNorm of nil", do(func() { nilT.LayerNorm([]int{3}, nil, nil, 1e-5) })},
		{"LayerNorm zero Tensor weight", do(func() { x.LayerNorm([]int{3}, zero, nil, 1e-5) })},
		{"RMSNorm wrong shape", do(func() { x.RMSNorm([]int{4}, nil, 1e-5) })},
		{"RMSNorm of ints", do(func() { ints.RMSNorm([]int{3}, nil, 1e-5) })},

		// Views.
		{"View of nil", do(func() { nilT.View(6) })},
		{"View wrong size", do(func() { x.View(4) })},
		{"View of a transpose", do(func() { x.T().View(6) })},
		{"View two -1", do(func() { x.View(-1, -1) })},
		{"View negative size", do(func() { x.View(-2, -3) })},
		{"View numel overflow of empty", do(func() { empty.View(1<<32, 1<<32) })},
		{"Reshape wrong size", do(func() { x.Reshape(5) })},
		{"Reshape of nil", do(func() { nilT.Reshape(6) })},
		{"Reshape numel overflow", do(func() { x.Reshape(1<<62, 4) })},
		{"Reshape overflow wrapping to the size", do(func() { x.Reshape(18, 3074457345618258603) })}, // 6 mod 2^64
		{"Reshape infer from zero", do(func() { empty.Reshape(0, -1) })},
		{"Flatten start after end", do(func() { x.Flatten(1, 0) })},
		{"Flatten out of range", do(func() { x.Flatten(0, 2) })},
		{"Flatten of nil", do(func() { nilT.Flatten(0, -1) })},
		{"Transpose out of range", do(func() { x.Transpose(0, 2) })},
		{"T of nil", do(func() { nilT.T() })},
		{"Permute too few dims", do(func() { x.Permute(0) })},
		{"Permute repeated dim", do(func() { x.Permute(1, 1) })},
		{"Permute out of range", do(func() { x.Permute(0, 5) })},
		{"Permute repeated dim past 64", do(func() {
			shape := make([]int, 66)
			perm := make([]int, 66)
			for i := range shape {
				shape[i], perm[i] = 1, i
			}
			perm[1] = 65 // 65 twice, 1 never
			Zeros(Float32, shape...).Permute(perm...)
		})},
		{"Expand to lower rank", do(func() { x.Expand(3) })},
		{"Expand non-1 dim", do(func() { x.Expand(4, 3) })},
		{"Expand negative new dim", do(func() { x.Expand(-1, 2, 3) })},
		{"Expand negative size", do(func() { Scalar(1, Float32).Expand(-5) })},
		{"Expand numel overflow", do(func() { Scalar(1, Float32).Expand(1<<40, 1<<40) })},
		{"ExpandAs nil", do(func() { x.ExpandAs(nilT) })},
		{"ExpandAs of nil", do(func() { nilT.ExpandAs(x) })},
		{"Squeeze out of range", do(func() { x.Squeeze(3) })},
		{"Unsqueeze out of range", do(func() { x.Unsqueeze(4) })},
		{"Unsqueeze of nil", do(func() { nilT.Unsqueeze(0) })},
		{"Slice zero step", do(func() { x.Slice(0, 0, 2, 0) })},
		{"Slice negative step", do(func() { x.Slice(0, 0, 2, -1) })},
		{"Slice dim out of range", do(func() { x.Slice(2, 0, 1, 1) })},
		{"Slice of a scalar", do(func() { Scalar(1, Float32).Slice(0, 0, 1, 1) })},
		{"Narrow past the end", do(func() { x.Narrow(1, 2, 2) })},
		{"Narrow negative length", do(func() { x.Narrow(1, 0, -1) })},
		{"Narrow length overflow", do(func() { x.Narrow(1, 1, math.MaxInt) })},
		{"Narrow start too negative", do(func() { x.Narrow(1, -5, 1) })},
		{"Narrow dim out of range", do(func() { x.Narrow(3, 0, 1) })},
		{"Narrow of nil", do(func() { nilT.Narrow(0, 0, 1) })},
		{"Narrow of a scalar", do(func() { Scalar(1, Float32).Narrow(0, 0, 1) })},
		{"Select index out of range", do(func() { x.Select(0, 2) })},
		{"Select negative index out of range", do(func() { x.Select(1, -4) })},
		{"Select index MinInt", do(func() { x.Select(1, math.MinInt) })},
		{"Select dim out of range", do(func() { x.Select(2, 0) })},
		{"Select of a scalar", do(func() { Scalar(1, Float32).Select(0, 0) })},
		{"Select of an empty dim", do(func() { empty.Select(0, 0) })},
		{"Select of nil", do(func() { nilT.Select(0, 0) })},
		{"Split sizes short", do(func() { x.Split([]int{1, 1}, 1) })},
		{"Split negative size", do(func() { x.Split([]int{4, -1}, 1) })},
		{"Split sizes overflow", do(func() { x.Split([]int{math.MaxInt, math.MaxInt, 4}, 1) })},
		{"Split dim out of range", do(func() { x.Split([]int{1}, 2) })},
		{"Chunk zero", do(func() { x.Chunk(0, 0) })},
		{"Chunk negative", do(func() { x.Chunk(-2, 0) })},
		{"Chunk of nil", do(func() { nilT.Chunk(1, 0) })},
		{"Contiguous of nil", do(func() { nilT.Contiguous() })},

		// Matrix products, joins and gathers.
		{"MatMul inner dims", do(func() { x.MatMul(x) })},
		{"MatMul scalar", do(func() { x.MatMul(Scalar(2, Float32)) })},
		{"MatMul nil", do(func() { x.MatMul(nilT) })},
		{"MatMul of nil", do(func() { nilT.MatMul(x) })},
		{"MatMul bools", do(func() { bools.MatMul(bools) })},
		{"MatMul batch dims", do(func() { Zeros(Float32, 2, 2, 3).MatMul(Zeros(Float32, 3, 3, 2)) })},
		{"MatMul result overflow", do(func() { wide.MatMul(tall) })},
		{"MatMul across devices", do(func() { x.MatMul(onGPU.T()) })},
		{"Linear weight rank", do(func() { x.Linear(Zeros(Float32, 1, 2, 3), nil) })},
		{"Linear in-features", do(func() { x.Linear(Zeros(Float32, 4, 2), nil) })},
		{"Linear nil weight", do(func() { x.Linear(nilT, nil) })},
		{"Linear of nil", do(func() { nilT.Linear(x, nil) })},
		{"Linear zero Tensor bias", do(func() { x.Linear(Zeros(Float32, 4, 3), zero) })},
		{"Cat empty list", do(func() { Cat([]*Tensor{}, 0) })},
		{"Cat nil list", do(func() { Cat(nil, 0) })},
		{"Cat nil element", do(func() { Cat([]*Tensor{x, nil}, 0) })},
		{"Cat zero Tensor", do(func() { Cat([]*Tensor{zero}, 0) })},
		{"Cat rank mismatch", do(func() { Cat([]*Tensor{x, ints}, 0) })},
		{"Cat scalars", do(func() { Cat([]*Tensor{Scalar(1, Float32), Scalar(2, Float32)}, 0) })},
		{"Cat dim out of range", do(func() { Cat([]*Tensor{x, x}, 2) })},
		{"Cat size mismatch", do(func() { Cat([]*Tensor{x, Zeros(Float32, 2, 2)}, 0) })},
		{"Cat across devices", do(func() { Cat([]*Tensor{x, onGPU}, 0) })},
		{"Cat size overflow", do(func() { Cat([]*Tensor{vast, vast, vast, vast}, 0) })},
		{"Stack empty list", do(func() { Stack(nil, 0) })},
		{"Stack shape mismatch", do(func() { Stack([]*Tensor{x, x.T()}, 0) })},
		{"Stack dim out of range", do(func() { Stack([]*Tensor{x, x}, 4) })},
		{"Stack nil element", do(func() { Stack([]*Tensor{nil}, 0) })},
		{"Gather index out of range", do(func() { x.Gather(1, FromSlice([]int64{0, 3}, 1, 2)) })},
		{"Gather negative index out of range", do(func() { x.Gather(0, FromSlice([]int64{-3}, 1, 1)) })},
		{"Gather float index", do(func() { x.Gather(1, x) })},
		{"Gather rank mismatch", do(func() { x.Gather(1, ints) })},
		{"Gather index too large", do(func() { x.Gather(1, Zeros(Int64, 3, 1)) })},
		{"Gather dim out of range", do(func() { x.Gather(2, Zeros(Int64, 1, 1)) })},
		{"Gather nil index", do(func() { x.Gather(0, nilT) })},
		{"Gather of nil", do(func() { nilT.Gather(0, ints) })},
		{"Gather scalar index out of range", do(func() { Scalar(1, Float32).Gather(0, Scalar(5, Int64)) })},
		{"IndexSelect out of range", do(func() { x.IndexSelect(0, FromSlice([]int64{2})) })},
		{"IndexSelect MinInt64", do(func() { x.IndexSelect(1, FromSlice([]int64{math.MinInt64})) })},
		{"IndexSelect 2-D index", do(func() { x.IndexSelect(0, Zeros(Int64, 1, 1)) })},
		{"IndexSelect float index", do(func() { x.IndexSelect(0, x.Select(1, 0)) })},
		{"IndexSelect dim out of range", do(func() { x.IndexSelect(2, ints) })},
		{"IndexSelect nil index", do(func() { x.IndexSelect(0, nilT) })},
		{"IndexSelect scalar out of range", do(func() { Scalar(1, Float32).IndexSelect(0, FromSlice([]int64{1})) })},
		{"Embedding id out of range", do(func() { Embedding(FromSlice([]int64{0, 2}), x) })},
		{"Embedding negative id out of range", do(func() { Embedding(FromSlice([]int32{-3}), x) })},
		{"Embedding 1-D weight", do(func() { Embedding(ints, ints.To(Float32)) })},
		{"Embedding float ids", do(func() { Embedding(x, x) })},
		{"Embedding nil weight", do(func() { Embedding(ints, nilT) })},
		{"Embedding nil ids", do(func() { Embedding(nilT, x) })},

		// Elements and in-place writes.
		{"At too few indices", do(func() { x.At(0) })},
		{"At out of range", do(func() { x.At(0, 3) })},
		{"At negative out of range", do(func() { x.At(-3, 0) })},
		{"At MinInt", do(func() { x.At(math.MinInt, 0) })},
		{"At of nil", do(func() { nilT.At() })},
		{"At of empty", do(func() { empty.At(0, 0) })},
		{"Set out of range", do(func() { Zeros(Float32, 2, 3).Set(1, 2, 0) })},
		{"Set too many indices", do(func() { Zeros(Float32, 2, 3).Set(1, 0, 0, 0) })},
		{"Set of nil", do(func() { nilT.Set(1) })},
		{"Fill of nil", do(func() { nilT.Fill(1) })},
		{"Fill of zero Tensor", do(func() { zero.Fill(1) })},
		{"Fill of an expanded view", do(func() { Zeros(Float32, 1, 3).Expand(4, 3).Fill(1) })},
		{"Copy into an expanded view", do(func() { Zeros(Float32, 3).Expand(2, 3).Copy(x) })},
		{"Copy shape mismatch", do(func() { Zeros(Float32, 2, 3).Copy(Zeros(Float32, 2)) })},
		{"Copy nil source", do(func() { Zeros(Float32, 2, 3).Copy(nilT) })},
		{"Copy into nil", do(func() { nilT.Copy(x) })},
		{"Copy into zero Tensor", do(func() { zero.Copy(x) })},
		{"Item of many", do(func() { x.Item() })},
		{"Item of empty", do(func() { empty.Item() })},
		{"Item of nil", do(func() { nilT.Item() })},
		{"Float32s of nil", do(func() { nilT.Float32s() })},
		{"Float64s of nil", do(func() { nilT.Float64s() })},
		{"Int64s of nil", do(func() { nilT.Int64s() })},
		{"Bools of zero Tensor", do(func() { zero.Bools() })},

		// Devices.
		{"ParseDevice unknown", func() error { _, err := ParseDevice("tpu"); return err }},
		{"ParseDevice negative", func() error { _, err := ParseDevice("cuda:-1"); return err }},
		{"ParseDevice overflow", func() error { _, err := ParseDevice("cuda:99999999999999999999"); return err }},
		{"SetDefaultDevice unknown type", do(func() { SetDefaultDevice(Device{Type: 9}) })},
		{"SetDefaultDevice negative GPU", do(func() { SetDefaultDevice(CUDA(-1)) })},
		{"SetDefaultDevice CPU with an index", do(func() { SetDefaultDevice(Device{Type: DeviceCPU, Index: 2}) })},
		{"Synchronize unknown type", do(func() { Synchronize(Device{Type: 9}) })},
		{"MemoryStats of the CPU", do(func() { MemoryStats(CPU) })},
		{"EmptyCache negative GPU", do(func() { EmptyCache(CUDA(-1)) })},
		{"MarkDynamic nil", do(func() { MarkDynamic(nilT, 0) })},
		{"MarkDynamic out of range", do(func() { MarkDynamic(Zeros(Float32, 2, 3), 2) })},
		{"MarkDynamic past 64 dims", do(func() { MarkDynamic(Zeros(Float32, make([]int, 70)...), 65) })},

		// Compile and friends.
		{"Compile an int", compile(42)},
		{"Compile a nil func", compile((func(*Tensor) *Tensor)(nil))},
		{"Compile nil", do(func() { Compile[any](nil) })},
		{"Compile a channel argument", compile(func(c chan int) *Tensor { return nil })},
		{"Compile a map argument", compile(func(m map[string]*Tensor) *Tensor { return nil })},
		{"Compile a func argument", compile(func(f func() *Tensor) *Tensor { return f() })},
		{"Compile a string argument", compile(func(x *Tensor, s string) *Tensor { return x })},
		{"Compile an interface argument", compile(func(v any) *Tensor { return nil })},
		{"Compile a pointer to an int", compile(func(x *Tensor, p *int) *Tensor { return x })},
		{"Compile a channel in a struct", compile(func(s struct{ C chan int }) *Tensor { return nil })},
		{"Compile a channel result", compile(func(x *Tensor) chan int { return nil })},
		{"Compile an error result", compile(func(x *Tensor) (*Tensor, error) { return x, nil })},
		{"Compile nil option", do(func() { Compile(func(x *Tensor) *Tensor { return x }, nil) })},
		{"Compiled call with a cyclic argument", do(func() {
			type node struct {
				X    *Tensor
				Next *node
			}
			n := &node{X: x}
			n.Next = n
			Compile(func(n *node) *Tensor { return n.X.Neg() })(n)
		})},
		{"Compile unknown backend", do(func() { Compile(func(x *Tensor) *Tensor { return x }, WithBackend("nope")) })},
		{"Compiled call with a nil tensor", do(func() {
			Compile(func(a, b *Tensor) *Tensor { return a.Add(b) })(x, nil)
		})},
		{"Compiled Expand past the element limit", do(func() {
			Compile(func(a *Tensor) *Tensor { return a.Sum().Expand(1<<40, 1<<40) })(x)
		})},
		{"Compiled MatMul past the element limit", do(func() {
			Compile(func(a, b *Tensor) *Tensor { return a.MatMul(b) })(wide, tall)
		})},
		{"Compiled call with bad shapes", do(func() {
			Compile(func(a, b *Tensor) *Tensor { return a.MatMul(b) })(x, x)
		})},
		{"Compiled variadic call with a nil tensor", do(func() {
			Compile(func(xs ...*Tensor) *Tensor { return Cat(xs, 0) })(x, nil)
		})},
		{"Compiled variadic call with no tensors", do(func() {
			Compile(func(xs ...*Tensor) *Tensor { return Cat(xs, 0) })()
		})},
		{"RegisterBackend nil", do(func() { RegisterBackend("hostile-nil", nil) })},
		{"RegisterBackend nil func", do(func() { RegisterBackend("hostile-nil-func", BackendFunc(nil)) })},
		{"Explain an int", func() error { _, err := Explain(42); return err }},
		{"Explain nil", func() error { _, err := Explain(nil); return err }},
		{"Explain argument count", func() error { _, err := Explain(func(a *Tensor) *Tensor { return a }); return err }},
		{"Explain argument type", func() error { _, err := Explain(func(a *Tensor) *Tensor { return a }, "x"); return err }},
		{"Explain nil for a number", func() error { _, err := Explain(func(a *Tensor, n int) *Tensor { return a }, x, nil); return err }},
		{"Explain a channel argument", func() error { _, err := Explain(func(c chan int) *Tensor { return nil }, make(chan int)); return err }},
		{"Explain variadic argument type", func() error {
			_, err := Explain(func(xs ...*Tensor) *Tensor { return xs[0] }, x, 3)
			return err
		}},
		{"Cond nil predicate", do(func() { Cond(nilT, func(a ...*Tensor) *Tensor { return x }, func(a ...*Tensor) *Tensor { return x }) })},
		{"Cond float predicate", do(func() { Cond(x, func(a ...*Tensor) *Tensor { return x }, func(a ...*Tensor) *Tensor { return x }) })},
		{"Cond nil branch", do(func() { Cond(Scalar(1, Bool), nil, nil) })},

		// Files and streams.
		{"ReadNPY nil reader", func() error { _, err := ReadNPY(nil); return err }},
		{"ReadNPY empty", npy(nil)},
		{"ReadNPY bad magic", npy(append([]byte("\x93NUMPX"), npyBytes[6:]...))},
		{"ReadNPY header length past the end", npy(npyBytes[:20])},
		{"ReadNPY huge header length", npy(append([]byte("\x93NUMPY\x02\x00"), 0xff, 0xff, 0xff, 0xff))},
		{"ReadNPY numel overflow", npy(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"))},
		{"ReadNPY byte size overflow", npy(npyWith("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}"))},
		{"ReadNPY huge shape", npy(npyWith("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,)}"))},
		{"ReadNPY too many dims", npy(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (" + repeat("1,", 100) + ")}"))},
		{"ReadNPY truncated data", npy(npyBytes[:len(npyBytes)-1])},
		{"ReadNPY negative dim", npy(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"))},
		{"LoadNPY missing file", func() error { _, err := LoadNPY(missing); return err }},
		{"WriteNPY nil writer", func() error { return WriteNPY(nil, x) }},
		{"WriteNPY nil tensor", func() error { return WriteNPY(&bytes.Buffer{}, nil) }},
		{"WriteNPY zero Tensor", func() error { return WriteNPY(&bytes.Buffer{}, zero) }},
		{"SaveNPY nil tensor", func() error { return SaveNPY(filepath.Join(t.TempDir(), "x.npy"), nil) }},
		{"ReadSafetensors nil reader", func() error { _, _, err := ReadSafetensors(nil); return err }},
		{"ReadSafetensors huge header length", safe(binary.LittleEndian.AppendUint64(nil, math.MaxUint64))},
		{"ReadSafetensors header past the end", safe(stBytes[:16])},
		{"ReadSafetensors negative offset", safe(st(`{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}`, le32(1)))},
		{"ReadSafetensors offsets past the end", safe(st(`{"dtype":"F32","shape":[1],"data_offsets":[8,12]}`, le32(1)))},
		{"ReadSafetensors offset overflow", safe(st(`{"dtype":"F32","shape":[1],"data_offsets":[9223372036854775804,9223372036854775808]}`, le32(1)))},
		{"ReadSafetensors overlap", safe(stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, le32(1, 2, 3)))},
		{"ReadSafetensors duplicate name", safe(stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, le32(1, 2)))},
		{"ReadSafetensors numel overflow", safe(st(`{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}`, nil))},
		{"ReadSafetensors huge shape", safe(st(`{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}`, le32(1)))},
		{"ReadSafetensors too many dims", safe(st(`{"dtype":"F32","shape":[`+repeat("1,", 100)+`1],"data_offsets":[0,4]}`, le32(1)))},
		{"ReadSafetensors truncated", safe(stBytes[:len(stBytes)-1])},
		{"LoadSafetensors missing file", func() error { _, _, err := LoadSafetensors(missing); return err }},
		{"WriteSafetensors nil writer", func() error { return WriteSafetensors(nil, map[string]*Tensor{"x": x}, nil) }},
		{"WriteSafetensors nil tensor", func() error { return WriteSafetensors(&bytes.Buffer{}, map[string]*Tensor{"x": nil}, nil) }},
		{"WriteSafetensors zero Tensor", func() error { return WriteSafetensors(&bytes.Buffer{}, map[string]*Tensor{"x": zero}, nil) }},
	}
	if array.AllocError("probe", Float64, []int{1 << 43}) != nil {
		// Shapes within the element limit, storage beyond any machine's
		// memory: asking Go's allocator would end the process.
		tests = append(tests, []struct {
			name string
			fn   func() error
		}{
			{"Zeros beyond the machine's memory", do(func() { Zeros(Float64, 1<<43) })},
			{"Rand beyond the machine's memory", do(func() { Rand(1, Float32, 1<<43) })},
			{"Arange beyond the machine's memory", do(func() { Arange(0, 1<<43, 1, Float32) })},
			{"Sum beyond the machine's memory", do(func() { Zeros(Float32, 0, 1<<43).Sum(0) })},
			{"Contiguous of a vast view", do(func() { vast.Contiguous() })},
			{"Float32s of a vast view", do(func() { vast.Float32s() })},
			{"Add of vast views", do(func() { vast.Add(vast) })},
			{"ReadNPY beyond the machine's memory", func() error {
				// A stream, which cannot be checked against its length.
				_, err := ReadNPY(onlyReader{bytes.NewReader(npyWith("{'descr': '<f8', 'fortran_order': False, 'shape': (8796093022208,)}"))})
				return err
			}},
		}...)
	}
	if len(tests) < 100 {
		t.Errorf("only %d rows", len(tests))
	}
	for _, tc := range tests {
		err, escaped := hostileCall(tc.fn)
		switch {
		case escaped != nil:
			t.Errorf("%s: panicked with %T: %v", tc.name, escaped, escaped)
		case err == nil:
			t.Errorf("%s: accepted", tc.name)
		default:
			if testing.Verbose() {
				t.Logf("%s: %v", tc.name, err)
			}
			var e *Error
			if errors.As(err, &e) && (e.Op == "" || e.Fix == "") {
				t.Errorf("%s: *Error without an op or a fix: %v", tc.name, err)
			}
		}
	}
	t.Logf("%d hostile inputs", len(tests))
	if DefaultDevice() != dev {
		t.Errorf("the default device changed from %v to %v", dev, DefaultDevice())
	}
}

// hostileCall runs fn through Try and reports the error it returned or
// panicked with, or the panic that escaped Try (anything but an *Error).
func hostileCall(fn func() error) (err error, escaped any) {
	defer func() {
		if r := recover(); r != nil {
			escaped = r
		}
	}()
	var ret error
	if err := Try(func() { ret = fn() }); err != nil {
		return err, nil
	}
	return ret, nil
}

func repeat(s string, n int) string { return string(bytes.Repeat([]byte(s), n)) }

// Edge cases that are valid: they must work, not be refused.
func TestHostileEdgesAccepted(t *testing.T) {
	x := FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	tests := []struct {
		name  string
		fn    func() *Tensor
		shape []int
	}{
		{"Zeros with a zero dim", func() *Tensor { return Zeros(Float32, 0, 1<<40) }, []int{0, 1 << 40}},
		{"FromSlice empty", func() *Tensor { return FromSlice([]float32{}, 0, 5) }, []int{0, 5}},
		{"Reshape empty", func() *Tensor { return Zeros(Float32, 0, 3).Reshape(3, 0, 7) }, []int{3, 0, 7}},
		{"Sum of empty", func() *Tensor { return Zeros(Float32, 0, 3).Sum(0) }, []int{3}},
		{"Slice huge step", func() *Tensor { return x.Slice(1, 0, 3, math.MaxInt) }, []int{2, 1}},
		{"Slice huge bounds", func() *Tensor { return x.Slice(1, math.MinInt, math.MaxInt, 1) }, []int{2, 3}},
		{"Slice empty", func() *Tensor { return x.Slice(1, 2, 1, 1) }, []int{2, 0}},
		{"Narrow empty at the end", func() *Tensor { return x.Narrow(1, 3, 0) }, []int{2, 0}},
		{"Arange empty", func() *Tensor { return Arange(0, 0, 1, Float32) }, []int{0}},
		{"Linspace zero", func() *Tensor { return Linspace(0, 1, 0, Float32) }, []int{0}},
		{"Eye zero", func() *Tensor { return Eye(Float32, 0) }, []int{0, 0}},
		{"Cat with empty", func() *Tensor { return Cat([]*Tensor{x, Zeros(Float32, 0, 3)}, 0) }, []int{2, 3}},
		{"IndexSelect empty index", func() *Tensor { return x.IndexSelect(0, Zeros(Int64, 0)) }, []int{0, 3}},
		{"Embedding empty ids", func() *Tensor { return Embedding(Zeros(Int64, 0, 2), x) }, []int{0, 2, 3}},
		{"MatMul empty inner", func() *Tensor { return Zeros(Float32, 2, 0).MatMul(Zeros(Float32, 0, 3)) }, []int{2, 3}},
		{"Split into empties", func() *Tensor { return x.Split([]int{0, 3, 0}, 1)[2] }, []int{2, 0}},
		{"RandInt full int64 range", func() *Tensor { return NewGenerator(1).RandInt(math.MinInt64, math.MaxInt64, 4) }, []int{4}},
	}
	for _, tc := range tests {
		var got *Tensor
		err, escaped := hostileCall(func() error { got = tc.fn(); return nil })
		switch {
		case escaped != nil:
			t.Errorf("%s: panicked with %T: %v", tc.name, escaped, escaped)
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case fmt.Sprint(got.Shape()) != fmt.Sprint(tc.shape):
			t.Errorf("%s: shape %v, want %v", tc.name, got.Shape(), tc.shape)
		}
	}
	// Printing invalid enum values names them instead of panicking.
	for _, s := range []fmt.Stringer{Mode(99), Mode(-1), DType(99), Device{Type: 9}} {
		if got := s.String(); got == "" {
			t.Errorf("%#v prints as nothing", s)
		}
	}
}
