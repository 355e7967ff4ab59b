package tensor_test

import (
	"fmt"

	"gocompile/tensor"
)

func Example() {
	x := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := tensor.FromSlice([]float32{10, 20, 30}, 3)

	y := x.Add(b).ReLU()          // b broadcasts over the rows
	fmt.Println(y.Float32s())     // row-major values
	fmt.Println(y.Sum(1).Shape()) // reduce over dim 1
	fmt.Println(x.T().Shape(), x.T().IsContiguous())
	// Output:
	// [11 22 33 14 25 36]
	// [2]
	// [3 2] false
}

func ExampleTry() {
	a := tensor.Zeros(tensor.Float32, 2, 3)
	b := tensor.Zeros(tensor.Float32, 4)
	err := tensor.Try(func() { a.Add(b) })
	fmt.Println(err)
	// Output:
	// Add on [2, 3] and [4]: shapes are not broadcastable: size 4 does not match size 3 at dim -1 of the result; make the sizes equal, or 1 where the operand should be repeated (Unsqueeze or Reshape it)
}

func ExampleTensor_MatMul() {
	a := tensor.FromSlice([]float64{1, 2, 3, 4}, 2, 2)
	v := tensor.FromSlice([]float64{1, 1}, 2)
	fmt.Println(a.MatMul(v).Float64s()) // matrix · vector
	// Output:
	// [3 7]
}

func ExampleTensor_Slice() {
	x := tensor.Arange(0, 10, 1, tensor.Int64)
	even := x.Slice(0, 0, 10, 2) // a view: x[0:10:2]
	even.Fill(-1)                // writes through to x
	fmt.Println(x.Int64s())
	// Output:
	// [-1 1 -1 3 -1 5 -1 7 -1 9]
}
