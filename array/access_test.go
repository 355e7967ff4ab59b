package array

import (
	"testing"

	"gocompile/inductor"
)

// Dense pointwise kernels read broadcast operands by access class: a
// row-broadcast (a bias over rows, i % inner) or column-broadcast (a
// per-row value, i / inner) class after dims are merged, else the generic
// N-d offset. broadcastAccess picks the class from merged strides.
func TestBroadcastAccess(t *testing.T) {
	for _, c := range []struct {
		st, shape []int
		acc       inductor.Access
		inner     int
	}{
		{[]int{0, 1}, []int{8, 4096}, inductor.RowBroadcast, 4096},
		{[]int{0, 5, 1}, []int{2, 3, 5}, inductor.RowBroadcast, 15},
		{[]int{1, 0}, []int{8, 4096}, inductor.ColBroadcast, 4096},
		{[]int{3, 1, 0, 0}, []int{2, 3, 4, 5}, inductor.ColBroadcast, 20},
		{[]int{0, 1, 0}, []int{2, 3, 4}, inductor.Strided, 0}, // middle broadcast
		{[]int{5, 0, 1}, []int{2, 3, 5}, inductor.Strided, 0}, // zero between contiguous dims
		{[]int{0, 2}, []int{8, 16}, inductor.Strided, 0},      // stepped
		{[]int{2, 0}, []int{8, 16}, inductor.Strided, 0},      // stepped
		{[]int{-1, 0}, []int{8, 16}, inductor.Strided, 0},     // reversed
		{[]int{1, 8}, []int{8, 16}, inductor.Strided, 0},      // transposed
		{[]int{0, 16, 1}, []int{2, 8, 16}, inductor.RowBroadcast, 128},
	} {
		acc, inner := broadcastAccess(c.st, c.shape)
		if acc != c.acc || inner != c.inner {
			t.Errorf("strides %v over %v: access %d inner %d, want %d %d", c.st, c.shape, acc, inner, c.acc, c.inner)
		}
	}
}
