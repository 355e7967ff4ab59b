package llama_test

import (
	"fmt"

	"gocompile/examples/llm/llama"
	"gocompile/tensor"
)

// A prefill of three tokens, then one compiled decode step at position 3;
// each writes its keys and values into the decoder's cache.
func Example() {
	m := llama.NewModel(llama.Configs["tiny"], 1, tensor.Float32)
	dec := llama.NewDecoder(m, 1)
	logits := dec.Forward(tensor.FromSlice([]int64{72, 105, 33}, 1, 3), tensor.Arange(0, 3, 1, tensor.Int64))
	next := logits.ArgMax(-1, false)
	step := tensor.Compile(dec.Forward)
	logits = step(next.Unsqueeze(1), tensor.FromSlice([]int64{3}))
	fmt.Println(logits.Shape())
	// Output: [1 256]
}
