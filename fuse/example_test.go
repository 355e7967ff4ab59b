package fuse_test

import (
	"fmt"

	"gocompile/fuse"
	"gocompile/ir"
)

// Softmax over rows decomposes into five ops; fusion makes them one row
// region, whose only buffer is its output.
func Example() {
	g := &ir.Graph{}
	x := g.Input([]int{8, 1024}, ir.Float32, ir.CPU, "")
	y, _ := g.Call(ir.OpSoftmax, ir.Attrs{Dim: -1}, "", x)
	g.Outputs = []*ir.Node{y}
	ir.Decompose(g)
	ir.DCE(g)
	regions, _ := fuse.Partition(g)
	for _, r := range regions {
		fmt.Println(r)
	}
	plan := fuse.PlanBuffers(g, regions, func(*fuse.Region) bool { return true })
	fmt.Println(plan)
	// Output:
	// row amax+sub+exp+sum+div -> v6
	// 0 reused buffers (0 bytes), peak 32768 bytes (eager 65568 bytes)
}
