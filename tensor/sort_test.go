package tensor

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
)

// refArgSort is a stable argsort of each line along d of row-major
// values: NaN above every number, -0 equal to 0.
func refArgSort(v []float64, shape []int, d int, desc bool) []float64 {
	out := make([]float64, len(v))
	if len(shape) == 0 {
		return out
	}
	L, inner := shape[d], 1
	for _, s := range shape[d+1:] {
		inner *= s
	}
	order := func(a, b float64) int {
		an, bn := math.IsNaN(a), math.IsNaN(b)
		switch {
		case an && bn:
			return 0
		case an:
			return 1
		case bn:
			return -1
		}
		return cmp.Compare(a, b)
	}
	for line := 0; line < len(v)/max(L, 1); line++ {
		base := line/inner*L*inner + line%inner
		perm := make([]int, L)
		for i := range perm {
			perm[i] = i
		}
		slices.SortStableFunc(perm, func(p, q int) int {
			c := order(v[base+p*inner], v[base+q*inner])
			if desc {
				c = -c
			}
			return c
		})
		for i, p := range perm {
			out[base+i*inner] = float64(p)
		}
	}
	return out
}

// ArgSort, Sort and TopK against a stable reference sort, over every
// dtype and dim, ties (small values), NaN, odd and long lines (longer than
// a GPU block sorts), non-contiguous inputs, both directions, compiled
// against eager.
func TestSort(t *testing.T) {
	layouts := []layout{lay(1), lay(3), lay(1023), lay(4097), lay(3, 5), lay(33, 129), lay(2, 3, 40), lay(),
		layTransposed, layStepCols, layExpandCol}
	seed := uint64(11)
	for _, dt := range allTypes {
		for _, l := range layouts {
			v := genVals(seed, numel(l.base), dt, domSmall)
			seed++
			if dt.IsFloat() && len(v) > 2 {
				v[1] = math.NaN() // the base tensor's second element
			}
			x := build(v, dt, l.base)
			if l.view != nil {
				x = l.view(x)
			}
			rank := len(x.Shape())
			for d := -1; d < max(rank, 1); d++ {
				for _, desc := range []bool{false, true} {
					what := fmt.Sprintf("ArgSort(%d, %v) of %v %s", d, desc, dt, l.name)
					nd := d
					if nd < 0 {
						nd += max(rank, 1)
					}
					nd = min(nd, max(rank-1, 0))
					want := refArgSort(vals(x), x.Shape(), nd, desc)
					got := x.ArgSort(d, desc)
					checkClose(t, what, got, Int64, x.Shape(), want, 0)
					f := func(x *Tensor) *Tensor { return x.ArgSort(d, desc) }
					checkSame(t, what+", compiled", Compile(f)(x), got)
					if rank == 0 {
						continue
					}
					values, idx := x.Sort(d, desc)
					checkSame(t, what+": Sort's indices", idx, got)
					checkSame(t, what+": Sort's values", values, x.Gather(d, got))
					k := min(3, x.Size(d))
					tv, ti := x.TopK(k, d, desc)
					checkSame(t, what+": TopK's indices", ti, got.Narrow(d, 0, k))
					checkSame(t, what+": TopK's values", tv, x.Gather(d, got.Narrow(d, 0, k)))
				}
			}
		}
	}
	expectError(t, "TopK with k above the dim", func() { Ones(Float32, 2, 3).TopK(4, 1, true) })
	expectError(t, "TopK with a negative k", func() { Ones(Float32, 2, 3).TopK(-1, 1, true) })
	expectError(t, "ArgSort with a dim out of range", func() { Ones(Float32, 2, 3).ArgSort(2, false) })
}
