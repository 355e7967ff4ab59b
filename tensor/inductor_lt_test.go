package tensor

import (
	"fmt"
	"testing"

	"gocompile/internal/stats"
)

// Products too tall for the generated GEMM run through cuBLASLt with the
// bias add fused (and, in MaxAutotune mode, also without an epilogue),
// and equal float64 loops: x·Wᵀ + b with x plain or strided, and x·W + b
// with W read along its rows.
func TestGPULtGemmBias(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	const m, k, n = 100, 300, 200
	x, w, b := Randn(1, Float32, m, k), Randn(2, Float32, n, k).MulScalar(0.05), Randn(3, Float32, n)
	wide := Randn(4, Float32, m, k+5)
	xv := wide.Narrow(1, 2, k)
	id := func(v float64) float64 { return v }
	before := stats.LtProducts.Load()
	for _, tc := range []struct {
		name string
		x    *Tensor // on the CPU, for the reference
		xd   *Tensor
		f    func(x, w, b *Tensor) *Tensor
		mode Mode
	}{
		{"linear", x, x.To(dev), func(x, w, b *Tensor) *Tensor { return x.Linear(w, b) }, Default},
		{"linear strided", xv.Contiguous(), wide.To(dev).Narrow(1, 2, k), func(x, w, b *Tensor) *Tensor { return x.Linear(w, b) }, Default},
		{"matmul plus bias", x, x.To(dev), func(x, w, b *Tensor) *Tensor { return x.MatMul(w.T().Contiguous()).Add(b) }, Default},
		{"linear, tuned", x, x.To(dev), func(x, w, b *Tensor) *Tensor { return x.Linear(w, b) }, MaxAutotune},
		{"product only, tuned", x, x.To(dev), func(x, w, b *Tensor) *Tensor { return x.MatMul(w.T()) }, MaxAutotune},
	} {
		var bias []float64
		if tc.name != "product only, tuned" {
			bias = b.Float64s()
		}
		want, scale := refLinear(tc.x.Float64s(), m, k, w.Float64s(), n, bias, nil, id)
		got := Compile(tc.f, WithMode(tc.mode))(tc.xd, w.To(dev), b.To(dev))
		gemmClose(t, fmt.Sprint(tc.name), got, want, scale)
	}
	if n := stats.LtProducts.Load() - before; n < 4 {
		t.Errorf("%d products ran through cuBLASLt, want at least 4", n)
	}
}
