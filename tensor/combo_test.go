package tensor

import (
	"fmt"
	"strings"
	"testing"

	"gocompile/internal/stats"
)

// A compiled update of captured buffers of many shapes (an optimizer's
// step: every buffer written in place from itself and a gradient) runs
// its independent fused regions as combos: on a GPU one launch for the
// dense members, the rest one by one. Each buffer ends as float64 loops
// compute it, step after step, in every floating dtype, with odd sizes,
// a transposed gradient and a buffer read through a transposed view.
func TestCompiledForeachUpdates(t *testing.T) {
	shapes := [][]int{{1}, {3}, {1023}, {4097}, {33, 31}, {8, 8}}
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		var bufs, grads []*Tensor
		var want [][]float64
		for i, s := range shapes {
			b := Randn(uint64(10+i), Float32, s...).To(dt)
			g := Randn(uint64(20+i), Float32, s...).To(dt)
			if i == len(shapes)-1 {
				g = Randn(uint64(20+i), Float32, s...).To(dt).T() // read strided: that member runs alone
			}
			bufs, grads = append(bufs, b), append(grads, g)
			want = append(want, vals(b))
		}
		scale := FromSlice([]float64{0.5}).Reshape().To(dt).ToDevice(bufs[0].Device())
		update := func(grads []*Tensor, scale *Tensor) *Tensor {
			for i, b := range bufs {
				b.Copy(b.Mul(scale).Add(grads[i].MulScalar(0.25)))
			}
			return scale
		}
		ex, err := Explain(update, grads, scale)
		if err != nil {
			t.Fatal(err)
		}
		combo := 0 // the units of the largest combo
		for _, r := range ex.Regions {
			if strings.HasPrefix(r, "combo [") {
				combo = max(combo, strings.Count(r, "||")+1)
			}
		}
		if combo < len(shapes) { // 16-bit chains on the CPU run as two
			t.Errorf("%v: the largest combo has %d units, want %d:\n%s", dt, combo, len(shapes), strings.Join(ex.Regions, "\n"))
		}
		var st CompileStats
		step := Compile(update, WithStats(&st))
		for k := range 3 {
			combos := stats.ComboLaunches.Load()
			step(grads, scale)
			for i, b := range bufs {
				g := vals(grads[i])
				for j := range want[i] {
					want[i][j] = quantize(quantize(want[i][j]*0.5, dt)+quantize(g[j]*0.25, dt), dt)
				}
				checkClose(t, fmt.Sprintf("%v step %d buffer %v", dt, k, shapes[i]), b, dt, shapes[i], want[i], 4)
			}
			if b := bufs[0]; b.Device() != CPU && stats.ComboLaunches.Load() == combos {
				t.Errorf("%v step %d: no combo launched", dt, k)
			}
		}
		if n := st.Compiles.Load(); n != 1 {
			t.Errorf("%v: %d compiles, want 1", dt, n)
		}
	}
}
