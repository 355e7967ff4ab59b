package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gocompile/cuda"
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

// Independent small regions of other shapes that read views (slices of
// one projection, angles broadcast over heads: a decode step's rotary
// embedding of its queries and of its keys) share one combo, whose
// members index their operands N-d; on a GPU, one launch. Each result is
// what float64 loops compute, in every floating dtype, at odd sizes.
func TestCompiledComboOfViews(t *testing.T) {
	for _, tc := range []struct{ hq, hk, half int }{{32, 4, 32}, {3, 1, 1}, {5, 7, 9}, {1, 2, 33}} {
		for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
			name := fmt.Sprintf("%v q%d k%d half %d", dt, tc.hq, tc.hk, tc.half)
			hd := 2 * tc.half
			x := Randn(1, Float32, 1, 1, (tc.hq+tc.hk)*hd).To(dt)
			cos := Randn(2, Float32, 1, 1, tc.half).To(dt)
			sin := Randn(3, Float32, 1, 1, tc.half).To(dt)
			rope := func(x *Tensor) *Tensor {
				x1, x2 := x.Narrow(3, 0, tc.half), x.Narrow(3, tc.half, tc.half)
				return Cat([]*Tensor{x1.Mul(cos).Sub(x2.Mul(sin)), x2.Mul(cos).Add(x1.Mul(sin))}, 3)
			}
			f := func(x *Tensor) (*Tensor, *Tensor) {
				q := rope(x.Narrow(2, 0, tc.hq*hd).Reshape(1, 1, tc.hq, hd))
				k := rope(x.Narrow(2, tc.hq*hd, tc.hk*hd).Reshape(1, 1, tc.hk, hd))
				return q, k
			}
			ex, err := Explain(f, x)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(ex.Regions, "\n"), "combo [") {
				t.Errorf("%s: no combo:\n%s", name, strings.Join(ex.Regions, "\n"))
			}
			xs, cs, ss := vals(x), vals(cos), vals(sin)
			want := func(h0, heads int) []float64 {
				var out []float64
				for h := range heads {
					row := xs[(h0+h)*hd : (h0+h+1)*hd]
					first := make([]float64, tc.half)
					second := make([]float64, tc.half)
					for i := range tc.half {
						a, b := row[i], row[tc.half+i]
						first[i] = quantize(quantize(a*cs[i], dt)-quantize(b*ss[i], dt), dt)
						second[i] = quantize(quantize(b*cs[i], dt)+quantize(a*ss[i], dt), dt)
					}
					out = append(append(out, first...), second...)
				}
				return out
			}
			combos := stats.ComboLaunches.Load()
			q, k := Compile(f)(x)
			checkClose(t, name+" q", q, dt, []int{1, 1, tc.hq, hd}, want(0, tc.hq), 4)
			checkClose(t, name+" k", k, dt, []int{1, 1, tc.hk, hd}, want(tc.hq, tc.hk), 4)
			if x.Device() != CPU && stats.ComboLaunches.Load() == combos {
				t.Errorf("%s: no combo launched", name)
			}
		}
	}
}

// Small regions of other shapes that broadcast a row or a column of an
// operand run dense, inner sizes passed, in one combo: on a GPU a call is
// one launch. Each result is what float64 loops compute.
func TestCompiledComboOfBroadcasts(t *testing.T) {
	for _, dt := range []DType{Float32, BFloat16, Float16, Float64} {
		x, b := Randn(1, Float32, 33, 31).To(dt), Randn(2, Float32, 31).To(dt)
		y, c := Randn(3, Float32, 5, 7).To(dt), Randn(4, Float32, 5, 1).To(dt)
		f := func(x, b, y, c *Tensor) (*Tensor, *Tensor) { return x.Add(b).Neg(), y.Mul(c).Abs() }
		ex, err := Explain(f, x, b, y, c)
		if err != nil {
			t.Fatal(err)
		}
		if regions := strings.Join(ex.Regions, "\n"); !strings.Contains(regions, "combo [") {
			t.Errorf("%v: no combo:\n%s", dt, regions)
		}
		g := Compile(f)
		g(x, b, y, c) // compiles
		launches := cuda.Launches()
		u, v := g(x, b, y, c)
		if x.Device() != CPU {
			if n := cuda.Launches() - launches; n != 1 {
				t.Errorf("%v: %d launches a call, want 1 (one combo)", dt, n)
			}
		}
		xs, bs, ys, cs := vals(x), vals(b), vals(y), vals(c)
		wantU, wantV := make([]float64, len(xs)), make([]float64, len(ys))
		for i := range xs {
			wantU[i] = -quantize(xs[i]+bs[i%31], dt)
		}
		for i := range ys {
			wantV[i] = math.Abs(quantize(ys[i]*cs[i/7], dt))
		}
		checkClose(t, fmt.Sprintf("%v row broadcast", dt), u, dt, []int{33, 31}, wantU, 4)
		checkClose(t, fmt.Sprintf("%v column broadcast", dt), v, dt, []int{5, 7}, wantV, 4)
	}
}

// A seeded sweep of functions of a few independent small pointwise
// results, each over operands reached through random views (a slice, a
// transpose, a broadcast row or column) at its own random shape and
// dtype: compiled (combos of dense, N-d and, left out of the launch,
// tiled members) gives what eager gives, call after call.
func TestCompiledComboSweep(t *testing.T) {
	sizes := []int{1, 3, 5, 17, 31, 64}
	tol := map[DType]float64{Float64: 1e-12, Float32: 1e-5, Float16: 4e-3, BFloat16: 3e-2}
	const cases = 40
	combos := 0 // cases whose regions form a combo
	defer func() {
		if combos < cases/2 {
			t.Errorf("%d of %d cases formed a combo", combos, cases)
		}
	}()
	for c := range cases {
		rng := rand.New(rand.NewPCG(77, uint64(c)))
		type member struct {
			base, other *Tensor
			view, op    int
		}
		var ms []member
		var args []*Tensor
		for range 2 + rng.IntN(3) {
			dt := floatTypes[rng.IntN(len(floatTypes))]
			r, cl := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
			m := member{view: rng.IntN(4), op: rng.IntN(4)}
			seed := uint64(1000*c + len(args))
			switch m.view {
			case 0: // contiguous
				m.base = Randn(seed, Float32, r, cl).To(dt)
			case 1: // a slice of a wider tensor
				m.base = Randn(seed, Float32, r, cl+7).To(dt)
			case 2: // a transpose
				m.base = Randn(seed, Float32, cl, r).To(dt)
			case 3: // rows of a taller tensor, every other one
				m.base = Randn(seed, Float32, 2*r, cl).To(dt)
			}
			// The other operand: a full tensor, a row or a column.
			switch rng.IntN(3) {
			case 0:
				m.other = Randn(seed+1, Float32, r, cl).To(dt)
			case 1:
				m.other = Randn(seed+1, Float32, cl).To(dt)
			case 2:
				m.other = Randn(seed+1, Float32, r, 1).To(dt)
			}
			ms = append(ms, m)
			args = append(args, m.base, m.other)
		}
		f := func(xs []*Tensor) []*Tensor {
			var out []*Tensor
			for i, m := range ms {
				x, y := xs[2*i], xs[2*i+1]
				switch m.view {
				case 1:
					x = x.Narrow(1, 3, x.Size(1)-7)
				case 2:
					x = x.T()
				case 3:
					x = x.Slice(0, 0, x.Size(0), 2)
				}
				switch m.op {
				case 0:
					out = append(out, x.Add(y).Neg())
				case 1:
					out = append(out, x.Mul(y).Sin())
				case 2:
					out = append(out, x.Sub(y).Abs().MulScalar(0.5))
				case 3:
					out = append(out, x.Mul(x).Add(y).Exp())
				}
			}
			return out
		}
		if ex, err := Explain(f, args); err != nil {
			t.Fatal(err)
		} else if strings.Contains(strings.Join(ex.Regions, "\n"), "combo [") {
			combos++
		}
		g := Compile(f)
		want := f(args)
		for call := range 2 {
			got := g(args)
			for i := range got {
				dt := want[i].DType()
				w, gv := vals(want[i]), vals(got[i])
				if !shapeEq(got[i].Shape(), want[i].Shape()) || got[i].DType() != dt {
					t.Fatalf("case %d call %d result %d: %v %v, eager %v %v", c, call, i, got[i].DType(), got[i].Shape(), dt, want[i].Shape())
				}
				for j := range w {
					if d := math.Abs(gv[j] - w[j]); d > tol[dt]*(1+math.Abs(w[j])) {
						t.Fatalf("case %d call %d result %d (%v, view %d, op %d) element %d: compiled %v, eager %v",
							c, call, i, dt, ms[i].view, ms[i].op, j, gv[j], w[j])
					}
				}
			}
		}
	}
}
