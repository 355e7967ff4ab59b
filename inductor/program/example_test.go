package program_test

import (
	"fmt"

	"gocompile/array"
	"gocompile/inductor/program"
	"gocompile/ir"
)

func Example() {
	// softmax(x * 2) over rows, as a graph.
	g := &ir.Graph{}
	x := g.Input([]int{2, 3}, ir.Float32, ir.CPU, "x")
	y, _ := g.Call(ir.OpMul, ir.Attrs{}, "", x, ir.ScalarOf(2))
	z, _ := g.Call(ir.OpSoftmax, ir.Attrs{Dim: -1}, "", y)
	g.Outputs = []*ir.Node{z}
	ir.Decompose(g) // softmax as the registry's primitives

	p, err := program.Compile(g, program.Config{})
	if err != nil {
		panic(err)
	}
	steps, _ := program.Steps(p)
	fmt.Println(len(steps), "kernel:", steps[0].Kind == program.RowStep)

	in := array.FromFloat64s([]float64{0, 0, 0, 1, 2, 3}, ir.Float32, 2, 3)
	out := p.Run([]*array.Array{in})[0]
	fmt.Printf("%.4f\n", out.Float32s())
	// Output:
	// 1 kernel: true
	// [0.3333 0.3333 0.3333 0.0159 0.1173 0.8668]
}
