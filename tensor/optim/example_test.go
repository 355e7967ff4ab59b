package optim_test

import (
	"fmt"

	"gocompile/tensor"
	"gocompile/tensor/optim"
)

// Fit y = 3x − 1 with one weight and one bias.
func Example() {
	x := tensor.Linspace(-1, 1, 16, tensor.Float64).Unsqueeze(1)
	y := x.MulScalar(3).SubScalar(1)
	w := tensor.Zeros(tensor.Float64, 1, 1).SetRequiresGrad(true)
	b := tensor.Zeros(tensor.Float64, 1).SetRequiresGrad(true)
	opt := optim.NewAdamW([]*tensor.Tensor{w, b}, 0.1)
	opt.WeightDecay = 0
	for range 300 {
		opt.ZeroGrad()
		d := x.Linear(w, b).Sub(y)
		d.Mul(d).Mean().Backward()
		opt.Step()
	}
	fmt.Printf("w %.2f, b %.2f\n", w.Item(), b.Item())
	// Output: w 3.00, b -1.00
}
