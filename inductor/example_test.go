package inductor_test

import (
	"fmt"
	"strings"

	"gocompile/inductor"
	"gocompile/ir"
)

// A fused kernel for x0 + x1: its entry point and the start of its
// CUDA C, which carries the expression it computes.
func Example() {
	k := &inductor.PointwiseKernel{
		Expr:    ir.Add(ir.Arg(0), ir.Arg(1)),
		Label:   "add_demo",
		Compute: ir.F32,
		Out:     ir.Float32,
		Operands: []inductor.Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: inductor.Dense},
			{DType: ir.Float32, Kind: ir.F32, Access: inductor.Dense},
		},
	}
	src, err := k.Source()
	if err != nil {
		panic(err)
	}
	fmt.Println(k.Name())
	fmt.Println(strings.SplitN(src, "\n", 2)[0])
	fmt.Println(strings.Contains(src, "add_demo = add(x0, x1)"))
	// Output:
	// gc_add_demo_float32d_float32d_f32_to_float32
	// // gocompile fused kernel add_demo
	// true
}
