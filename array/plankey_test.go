package array

import (
	"slices"
	"testing"

	"gocompile/cuda"
	"gocompile/ir"
)

// Launch plans kept per call site are reused only for tensors whose
// AppendLayoutKey is equal: same dtype, shape, strides and address
// modulo 64 bytes. Every other difference gives another key.
func TestAppendLayoutKey(t *testing.T) {
	view := func(dt ir.DType, ptr cuda.DevicePtr, offset int, shape, strides []int) *Array {
		st := &storage{dev: ir.CUDA(0), gpu: &gpuBuffer{block: cuda.Block{Ptr: ptr, Size: 1 << 20}}}
		return &Array{st: st, shape: shape, strides: strides, offset: offset, dtype: dt}
	}
	base := view(ir.Float32, 0x10000, 0, []int{4, 6}, []int{6, 1})
	key := func(a *Array) []int { return AppendLayoutKey(nil, a) }
	for _, c := range []struct {
		name string
		a    *Array
		same bool
	}{
		{"the same layout elsewhere, 64 bytes apart", view(ir.Float32, 0x20040, 0, []int{4, 6}, []int{6, 1}), true},
		{"an offset of 16 elements (64 bytes)", view(ir.Float32, 0x10000, 16, []int{4, 6}, []int{6, 1}), true},
		{"an offset of one element", view(ir.Float32, 0x10000, 1, []int{4, 6}, []int{6, 1}), false},
		{"another dtype", view(ir.BFloat16, 0x10000, 0, []int{4, 6}, []int{6, 1}), false},
		{"transposed strides", view(ir.Float32, 0x10000, 0, []int{4, 6}, []int{1, 4}), false},
		{"another shape", view(ir.Float32, 0x10000, 0, []int{6, 4}, []int{4, 1}), false},
		{"a broadcast dim", view(ir.Float32, 0x10000, 0, []int{4, 6}, []int{0, 1}), false},
		{"another rank", view(ir.Float32, 0x10000, 0, []int{24}, []int{1}), false},
	} {
		if got := slices.Equal(key(base), key(c.a)); got != c.same {
			t.Errorf("%s: keys equal %v, want %v", c.name, got, c.same)
		}
	}
}

// LastPlan serves the kept plan to a call with the same device and key,
// plans again for another key or device or a stale plan, and keeps a copy
// of the key, not the caller's buffer.
func TestLastPlan(t *testing.T) {
	var m LastPlan[int]
	plans := 0
	plan := func() int { plans++; return plans }
	g1, g2 := &GPU{}, &GPU{}
	for _, c := range []struct {
		name  string
		g     *GPU
		key   []int
		stale bool
		want  int
	}{
		{"first call", g1, []int{1, 2, 3}, false, 1},
		{"same key", g1, []int{1, 2, 3}, false, 1},
		{"another key", g1, []int{1, 2, 4}, false, 2},
		{"back to the first", g1, []int{1, 2, 3}, false, 3},
		{"another device", g2, []int{1, 2, 3}, false, 4},
		{"stale", g2, []int{1, 2, 3}, true, 5},
	} {
		stale := func(int) bool { return c.stale }
		if got := m.Get(c.g, c.key, stale, plan); got != c.want {
			t.Fatalf("%s: plan %d, want %d", c.name, got, c.want)
		}
	}
	buf := []int{1, 2, 3}
	var fresh LastPlan[int]
	kept := fresh.Get(g1, buf, nil, plan)
	buf[2] = 9 // the caller reuses its buffer: the kept key must not change
	if got := fresh.Get(g1, []int{1, 2, 3}, nil, plan); got != kept {
		t.Errorf("after the caller's buffer changed: plan %d, want the kept %d", got, kept)
	}
}
