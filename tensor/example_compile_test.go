package tensor_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gocompile/ir"
	"gocompile/tensor"
)

func ExampleCompile() {
	gelu := func(x, b *tensor.Tensor) *tensor.Tensor {
		return x.Add(b).GELU().MulScalar(2)
	}
	var stats tensor.CompileStats
	fast := tensor.Compile(gelu, tensor.WithStats(&stats)) // same type as gelu

	x := tensor.FromSlice([]float32{-1, 0, 1, 2, 3, 4}, 2, 3)
	b := tensor.FromSlice([]float32{1, 1, 1}, 3)
	y := fast(x, b) // traces gelu, compiles it, runs it
	y = fast(x, b)  // checks the guards and replays the compiled graph
	fmt.Printf("%.4f\n", y.Float32s())
	fmt.Println("calls:", stats.Calls.Load(), "compiles:", stats.Compiles.Load())
	// Output:
	// [0.0000 1.6827 3.9090 5.9919 7.9997 10.0000]
	// calls: 2 compiles: 1
}

func ExampleExplain() {
	norm := func(x *tensor.Tensor) *tensor.Tensor {
		if x.Max().Item() > 1 { // reading a value breaks the graph
			x = x.DivScalar(x.Max().Item())
		}
		return x.Softmax(-1)
	}
	x := tensor.FromSlice([]float32{1, 2, 3, 4}, 2, 2)
	ex, err := tensor.Explain(norm, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("graphs:", ex.Graphs)
	for _, b := range ex.Breaks {
		fmt.Println("break:", b.Reason, "at", filepath.Base(b.Loc))
	}
	// Output:
	// graphs: 3
	// break: Item at example_compile_test.go:33
	// break: Item at example_compile_test.go:34
}

func ExampleCond() {
	// Cond branches on data without a graph break: compiled, both branches
	// are recorded and Where picks one.
	clip := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor {
		big := x.Abs().Max().GtScalar(1)
		return tensor.Cond(big,
			func(a ...*tensor.Tensor) *tensor.Tensor { return a[0].DivScalar(10) },
			func(a ...*tensor.Tensor) *tensor.Tensor { return a[0] },
			x)
	}, tensor.FullGraph())
	fmt.Println(clip(tensor.FromSlice([]float32{0.5, -0.25})).Float32s())
	fmt.Println(clip(tensor.FromSlice([]float32{5, -20})).Float32s())
	// Output:
	// [0.5 -0.25]
	// [0.5 -2]
}

func ExampleMarkDynamic() {
	var stats tensor.CompileStats
	rowSums := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.Sum(1) },
		tensor.WithStats(&stats))
	for _, batch := range []int{2, 3, 5} {
		// Dim 0 is dynamic from the first compile: new batch sizes reuse it.
		x := tensor.MarkDynamic(tensor.Ones(tensor.Float32, batch, 4), 0)
		fmt.Println(rowSums(x).Float32s())
	}
	fmt.Println("compiles:", stats.Compiles.Load())
	// Output:
	// [4 4]
	// [4 4 4]
	// [4 4 4 4 4]
	// compiles: 1
}

func ExampleWithMode() {
	// ReduceOverhead replays each program on a GPU as one CUDA graph; on
	// the CPU it runs as Default does.
	f := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(3).ReLU() },
		tensor.WithMode(tensor.ReduceOverhead))
	fmt.Println(f(tensor.FromSlice([]float32{-1, 2})).Float32s())
	fmt.Println(tensor.Default, tensor.ReduceOverhead, tensor.MaxAutotune)
	// Output:
	// [0 6]
	// default reduce-overhead max-autotune
}

func ExampleSaveSafetensors() {
	dir, err := os.MkdirTemp("", "example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "weights.safetensors")

	weights := map[string]*tensor.Tensor{
		"w": tensor.FromSlice([]float32{1, 2, 3, 4}, 2, 2),
		"b": tensor.FromSlice([]float32{0.5, -0.5}, 2).To(tensor.BFloat16),
	}
	if err := tensor.SaveSafetensors(path, weights, map[string]string{"format": "pt"}); err != nil {
		log.Fatal(err)
	}
	loaded, meta, err := tensor.LoadSafetensors(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(loaded["w"].Shape(), loaded["w"].Float32s())
	fmt.Println(loaded["b"].DType(), loaded["b"].Float32s())
	fmt.Println(meta["format"])
	// Output:
	// [2 2] [1 2 3 4]
	// bfloat16 [0.5 -0.5]
	// pt
}

func ExampleRegisterBackend() {
	// A backend receives each captured graph and returns the Program that
	// runs it; this one counts the nodes and delegates to "eager".
	tensor.RegisterBackend("counting", tensor.BackendFunc(func(g *ir.Graph) (tensor.Program, error) {
		fmt.Println("compiling a graph of", len(g.Nodes), "nodes")
		eager, _ := tensor.LookupBackend("eager")
		return eager.Compile(g)
	}))
	f := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.Exp().Sum() },
		tensor.WithBackend("counting"))
	fmt.Println(f(tensor.Zeros(tensor.Float32, 3)).Item())
	// Output:
	// compiling a graph of 3 nodes
	// 3
}
