package ir_test

import (
	"fmt"

	"gocompile/ir"
)

func Example() {
	op, _ := ir.Lookup("gelu")
	fmt.Println(op.Kind, op.Expr)

	// Evaluate the op's semantics on a block of float32 values.
	blk, _ := ir.CompileBlock(op.Expr, []ir.Kind{ir.F32}, ir.F32)
	f := blk.NewFrame(4, nil)
	f.SetArg(0, ir.Vec{F32: []float32{-1, 0, 1, 2}})
	fmt.Printf("%.4f\n", f.Run(4, nil).F32)

	// Print the same semantics as C for a CUDA kernel.
	c, _ := op.Expr.C(func(int) string { return "x" }, nil, []ir.Kind{ir.F32}, ir.F32)
	fmt.Println(c)
	// Output:
	// pointwise mul(mul(0.5, x0), add(1, erf(mul(x0, 0.7071067811865476))))
	// [-0.1587 0.0000 0.8413 1.9545]
	// ((0.5f * x) * (1.0f + erff((x * 0.707106769f))))
}

func ExamplePromoteTypes() {
	fmt.Println(ir.PromoteTypes(ir.Int64, ir.Float16))
	fmt.Println(ir.PromoteTypes(ir.Float16, ir.BFloat16))
	fmt.Println(ir.ResultType(ir.Operand{DType: ir.Int32}, ir.Operand{DType: ir.Float64, Scalar: true}))
	// Output:
	// float16
	// float32
	// float32
}

func ExampleBroadcast() {
	s, _ := ir.Broadcast("Add", []int{3, 1}, []int{1, 5})
	fmt.Println(s)
	_, err := ir.Broadcast("Add", []int{3}, []int{4})
	fmt.Println(err)
	// Output:
	// [3 5]
	// Add on [3] and [4]: shapes are not broadcastable: size 4 does not match size 3 at dim -1 of the result; make the sizes equal, or 1 where the operand should be repeated (Unsqueeze or Reshape it)
}
