package program

import (
	"fmt"
	"testing"

	"gocompile/array"
	"gocompile/inductor"
	"gocompile/ir"
)

// The row-shaped composites plan as one row kernel in every floating
// dtype and on odd row lengths; the others, and misuse, plan nothing (their
// decomposition runs and reports errors as before).
func TestCompositePlansAreOneRowRegion(t *testing.T) {
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
		for _, R := range []int{3, 7, 1023, 4097, 50257} {
			x := array.New(array.CPU, dt, []int{5, R})
			w := array.New(array.CPU, dt, []int{R})
			b := array.New(array.CPU, dt, []int{R})
			xt := array.New(array.CPU, dt, []int{R, 5}).WithLayout(ir.Layout{Shape: []int{5, R}, Strides: []int{1, 5}})
			for _, c := range []struct {
				name  string
				op    *ir.Op
				a     ir.Attrs
				args  []ir.Value
				moved bool
				one   bool
			}{
				{"softmax", ir.OpSoftmax, ir.Attrs{Dim: -1}, []ir.Value{x}, false, true},
				{"log_softmax", ir.OpLogSoftmax, ir.Attrs{Dim: 1}, []ir.Value{x}, false, true},
				{"softmax dim 0 of a transpose", ir.OpSoftmax, ir.Attrs{Dim: 0}, []ir.Value{xt}, true, true},
				{"layer_norm", ir.OpLayerNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-5}}, []ir.Value{x, w, b}, false, true},
				{"layer_norm without affine", ir.OpLayerNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-5}}, []ir.Value{x, nil, nil}, false, true},
				{"layer_norm over 2 dims", ir.OpLayerNorm, ir.Attrs{Dims: []int{1, R}, Scalars: []float64{1e-5}}, []ir.Value{x.WithLayout(ir.Layout{Shape: []int{5, 1, R}, Strides: []int{R, R, 1}}), w.WithLayout(ir.Layout{Shape: []int{1, R}, Strides: []int{R, 1}}), nil}, false, true},
				{"rms_norm", ir.OpRMSNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-6}}, []ir.Value{x, w}, false, true},
				{"var", ir.OpVar, ir.Attrs{Dims: []int{-1}, Scalars: []float64{1}}, []ir.Value{x}, false, true},
				{"var keepdim", ir.OpVar, ir.Attrs{Dims: []int{1}, KeepDim: true, Scalars: []float64{0}}, []ir.Value{x}, false, true},
				{"var over rows", ir.OpVar, ir.Attrs{Dims: []int{0}, Scalars: []float64{1}}, []ir.Value{x}, false, false},
				{"linear", ir.OpLinear, ir.Attrs{}, []ir.Value{x, array.New(array.CPU, dt, []int{4, R}), nil}, false, false},
				{"layer_norm of the wrong shape", ir.OpLayerNorm, ir.Attrs{Dims: []int{R + 1}, Scalars: []float64{1e-5}}, []ir.Value{x, nil, nil}, false, false},
				{"softmax dim out of range", ir.OpSoftmax, ir.Attrs{Dim: 2}, []ir.Value{x}, false, false},
			} {
				p := newCompositePlan(compositeKey{moved: c.moved, flat: len(c.a.Dims) > 1}, c.op, c.a, c.args)
				if (p.step != nil) != c.one {
					t.Errorf("%s %v R=%d: one row kernel %v, want %v", c.name, dt, R, p.step != nil, c.one)
					continue
				}
				if p.step != nil && len(p.step.kernel.Stages) == 0 {
					t.Errorf("%s %v R=%d: a row kernel without stages", c.name, dt, R)
				}
			}
		}
	}
}

// ChooseRowPlan gives every row length and row count a valid launch
// shape: blocks of whole warps up to 1024 threads, several rows per block
// only for short rows, registers for rows that fit, the stash (a cluster
// of blocks a row where clusters exist) for longer rows that fit the
// shared memory, a loop otherwise; and the generated kernel accepts it.
func TestChooseRowPlan(t *testing.T) {
	x := array.New(array.CPU, ir.Float32, []int{2, 8})
	p := newCompositePlan(compositeKey{}, ir.OpSoftmax, ir.Attrs{Dim: -1}, []ir.Value{x})
	for _, R := range []int{1, 2, 3, 7, 16, 64, 255, 256, 1023, 1024, 4097, 8192, 32768, 50257, 200000, 1 << 22} {
		for _, vec := range []int{1, 4} {
			if vec == 4 && R%4 != 0 {
				continue
			}
			k := p.step.kernel
			for _, rows := range []int{1, 7, 300, 100000} {
				for _, d := range []inductor.RowDevice{{SMs: 132}, {SMs: 132, MaxShared: 48 << 10}, {SMs: 132, MaxShared: 225 << 10, Clusters: true}} {
					pl := inductor.ChooseRowPlan(d, R, vec, rows, k.StashBytes)
					block := pl.Threads * pl.Groups
					vectors := (R + vec - 1) / vec
					C, maxC := max(pl.Cluster, 1), 1
					if d.Clusters {
						maxC = 8
					}
					chunk := ((R+C-1)/C + vec - 1) / vec * vec
					last := ((R+maxC-1)/maxC + vec - 1) / vec * vec
					what := fmt.Sprintf("R=%d vec=%d rows=%d %+v: %+v", R, vec, rows, d, pl)
					switch {
					case block%32 != 0 || block > 1024 || pl.Groups < 1:
						t.Errorf("%s: block of %d threads", what, block)
					case pl.Groups > 1 && pl.Threads > 32:
						t.Errorf("%s: groups of more than a warp", what)
					case pl.Persist > 0 && pl.Persist*pl.Threads < vectors:
						t.Errorf("%s: persistent threads do not cover the row", what)
					case pl.Persist > 8:
						t.Errorf("%s: more than 8 vectors a thread in registers", what)
					case pl.Stash && (pl.Persist > 0 || k.StashBytes(chunk) > d.MaxShared || C > maxC):
						t.Errorf("%s: stashes %d bytes, limit %d", what, k.StashBytes(chunk), d.MaxShared)
					case pl.Persist == 0 && !pl.Stash && k.StashBytes(last) <= d.MaxShared:
						t.Errorf("%s: a looped kernel where a share of the row fits in %d bytes", what, d.MaxShared)
					}
					k.Threads, k.Groups, k.Persist, k.Stash, k.Cluster, k.Vec = pl.Threads, pl.Groups, pl.Persist, pl.Stash, pl.Cluster, vec
					if _, err := k.Source(); err != nil {
						t.Errorf("%s: %v", what, err)
					}
				}
			}
		}
	}
}
