package array_test

import (
	"fmt"

	"gocompile/array"
	"gocompile/ir"
)

func Example() {
	x := array.FromFloat64s([]float64{1, 2, 3, 4, 5, 6}, ir.Float32, 2, 3)
	b := array.FromFloat64s([]float64{10, 20, 30}, ir.Float32, 3)

	y := array.Apply(ir.OpAdd, ir.Attrs{}, x, b) // b broadcasts over the rows
	s := array.Apply(ir.OpSum, ir.Attrs{Dims: []int{1}}, y)
	fmt.Println(y.Shape(), y.Float32s())
	fmt.Println(s.Shape(), s.Float32s())
	// Output:
	// [2 3] [11 22 33 14 25 36]
	// [2] [66 75]
}
