package tensor

import (
	"math"
	"testing"
)

// The expected strings are what PyTorch prints for the same tensor (with
// "torch." dropped from dtype names).
func TestString(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	arange := func(n int, dt DType) *Tensor { return Arange(0, float64(n), 1, dt) }
	hidden := Arange(100, 2100, 1, Float32)
	hidden.Set(0.5, 1000) // not shown, so it must not leave int mode

	tests := []struct {
		name string
		t    *Tensor
		want string
	}{
		{"int mode 2-D", FromSlice([]float32{1, 2, 3, 4}, 2, 2), "tensor([[1., 2.],\n        [3., 4.]])"},
		{"fixed", FromSlice([]float32{0.1, 0.25}), "tensor([0.1000, 0.2500])"},
		{"sci small", FromSlice([]float32{1e-5, 1}), "tensor([1.0000e-05, 1.0000e+00])"},
		{"summarised 1-D", arange(2000, Int64), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"},
		{"3-D", arange(12, Float32).Reshape(2, 2, 3),
			"tensor([[[ 0.,  1.,  2.],\n         [ 3.,  4.,  5.]],\n\n        [[ 6.,  7.,  8.],\n         [ 9., 10., 11.]]])"},
		{"4-D", arange(4, Int64).Reshape(1, 2, 1, 2), "tensor([[[[0, 1]],\n\n         [[2, 3]]]])"},
		{"bools", FromSlice([]bool{true, false, true}), "tensor([ True, False,  True])"},
		{"int32", FromSlice([]int32{1, 2}), "tensor([1, 2], dtype=int32)"},
		{"negative ints", FromSlice([]int{-100, 5, 7}), "tensor([-100,    5,    7])"},
		{"float16", FromSlice([]float32{0.1, 1.5, -2}).To(Float16), "tensor([ 0.1000,  1.5000, -2.0000], dtype=float16)"},
		{"bfloat16", FromSlice([]float32{1, 2.5}).To(BFloat16), "tensor([1.0000, 2.5000], dtype=bfloat16)"},
		{"float64", FromSlice([]float64{1.5, 2}), "tensor([1.5000, 2.0000], dtype=float64)"},
		{"transposed", FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3).T(), "tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])"},
		{"strided slice", arange(10, Int64).Slice(0, 1, 9, 3), "tensor([1, 4, 7])"},
		{"column", arange(12, Float32).Reshape(3, 4).Select(1, 1), "tensor([1., 5., 9.])"},
		{"sliced transpose", FromSlice([]int{1, 2, 3, 4, 5, 6}, 2, 3).T().Slice(0, 1, 3, 1), "tensor([[2, 5],\n        [3, 6]])"},
		{"expanded", FromSlice([]float32{1, 2}).Expand(3, 2), "tensor([[1., 2.],\n        [1., 2.],\n        [1., 2.]])"},
		{"scalar", Scalar(3.5, Float32), "tensor(3.5000)"},
		{"scalar int", Scalar(2, Int64), "tensor(2)"},
		{"scalar float64", Scalar(2, Float64), "tensor(2., dtype=float64)"},
		{"scalar nan", Scalar(nan, Float32), "tensor(nan)"},
		{"scalar sci", Scalar(1e-5, Float32), "tensor(1.0000e-05)"},
		{"empty", FromSlice([]float32{}), "tensor([])"},
		{"empty 2-D", Zeros(Float32, 0, 3), "tensor([], size=(0, 3))"},
		{"empty int64", Zeros(Int64, 0), "tensor([], dtype=int64)"},
		{"empty bool 2-D", Zeros(Bool, 2, 0), "tensor([], size=(2, 0), dtype=bool)"},
		{"non-finite", FromSlice([]float32{1.5, float32(nan), float32(inf), float32(-inf)}), "tensor([1.5000,    nan,    inf,   -inf])"},
		{"zero and nan", FromSlice([]float32{0, float32(nan)}), "tensor([0., nan])"},
		{"int mode -inf", FromSlice([]float32{1, float32(-inf)}), "tensor([1., -inf])"},
		{"zeros", Zeros(Float32, 3), "tensor([0., 0., 0.])"},
		{"negative zero", FromSlice([]float32{float32(math.Copysign(0, -1)), 1}), "tensor([-0., 1.])"},
		{"int mode sci", FromSlice([]float32{1, 1e9}), "tensor([1.0000e+00, 1.0000e+09])"},
		{"ratio sci", FromSlice([]float32{0.5, 600}), "tensor([5.0000e-01, 6.0000e+02])"},
		{"wide fixed", FromSlice([]float32{0.5, 400.25}), "tensor([  0.5000, 400.2500])"},
		{"negative fixed", FromSlice([]float32{-1.5, 2.25}), "tensor([-1.5000,  2.2500])"},
		{"sci with nan", FromSlice([]float32{-1e-5, 123.456, float32(nan)}), "tensor([-1.0000e-05,  1.2346e+02,         nan])"},
		{"wrapped", Linspace(0, 1, 20, Float32),
			"tensor([0.0000, 0.0526, 0.1053, 0.1579, 0.2105, 0.2632, 0.3158, 0.3684, 0.4211,\n" +
				"        0.4737, 0.5263, 0.5789, 0.6316, 0.6842, 0.7368, 0.7895, 0.8421, 0.8947,\n" +
				"        0.9474, 1.0000])"},
		{"suffix on new line", arange(18, Int32),
			"tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17],\n       dtype=int32)"},
		{"wrapped 2-D", arange(30, Float32).Reshape(2, 15).DivScalar(7),
			"tensor([[0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n" +
				"         1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000],\n" +
				"        [2.1429, 2.2857, 2.4286, 2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857,\n" +
				"         3.4286, 3.5714, 3.7143, 3.8571, 4.0000, 4.1429]])"},
		{"summarised 2-D", arange(10000, Int64).Reshape(100, 100),
			"tensor([[   0,    1,    2,  ...,   97,   98,   99],\n" +
				"        [ 100,  101,  102,  ...,  197,  198,  199],\n" +
				"        [ 200,  201,  202,  ...,  297,  298,  299],\n" +
				"        ...,\n" +
				"        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n" +
				"        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n" +
				"        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])"},
		{"summarised rows", arange(1010, Int64).Reshape(505, 2),
			"tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n" +
				"        [1004, 1005],\n        [1006, 1007],\n        [1008, 1009]])"},
		{"summarised by shown values", hidden, "tensor([ 100.,  101.,  102.,  ..., 2097., 2098., 2099.])"},
		{"summarised 3-D", arange(2000, Float32).Reshape(2, 10, 100),
			"tensor([[[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.7000e+01,\n" +
				"          9.8000e+01, 9.9000e+01],\n" +
				"         [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.9700e+02,\n" +
				"          1.9800e+02, 1.9900e+02],\n" +
				"         [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 2.9700e+02,\n" +
				"          2.9800e+02, 2.9900e+02],\n" +
				"         ...,\n" +
				"         [7.0000e+02, 7.0100e+02, 7.0200e+02,  ..., 7.9700e+02,\n" +
				"          7.9800e+02, 7.9900e+02],\n" +
				"         [8.0000e+02, 8.0100e+02, 8.0200e+02,  ..., 8.9700e+02,\n" +
				"          8.9800e+02, 8.9900e+02],\n" +
				"         [9.0000e+02, 9.0100e+02, 9.0200e+02,  ..., 9.9700e+02,\n" +
				"          9.9800e+02, 9.9900e+02]],\n" +
				"\n" +
				"        [[1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.0970e+03,\n" +
				"          1.0980e+03, 1.0990e+03],\n" +
				"         [1.1000e+03, 1.1010e+03, 1.1020e+03,  ..., 1.1970e+03,\n" +
				"          1.1980e+03, 1.1990e+03],\n" +
				"         [1.2000e+03, 1.2010e+03, 1.2020e+03,  ..., 1.2970e+03,\n" +
				"          1.2980e+03, 1.2990e+03],\n" +
				"         ...,\n" +
				"         [1.7000e+03, 1.7010e+03, 1.7020e+03,  ..., 1.7970e+03,\n" +
				"          1.7980e+03, 1.7990e+03],\n" +
				"         [1.8000e+03, 1.8010e+03, 1.8020e+03,  ..., 1.8970e+03,\n" +
				"          1.8980e+03, 1.8990e+03],\n" +
				"         [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9970e+03,\n" +
				"          1.9980e+03, 1.9990e+03]]])"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Values print the same on every device; TestStringGPU checks
			// the device suffix.
			if got := tc.t.cpu().String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestStringGPU(t *testing.T) {
	requireGPU(t)
	x := FromSlice([]float32{1, 2}).ToDevice(CUDA(0))
	if got, want := x.String(), "tensor([1., 2.], device='cuda:0')"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
