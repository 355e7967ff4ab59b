package optim

import (
	"math"
	"slices"

	"gocompile/tensor"
)

// SGD is stochastic gradient descent with optional momentum, Nesterov
// momentum, dampening and weight decay, as torch.optim.SGD computes it:
//
//	d = g + WeightDecay·p
//	buf = Momentum·buf + (1 − Dampening)·d   (buf = d on the first step)
//	d = d + Momentum·buf if Nesterov, else buf (with momentum)
//	p = p − LR·d
type SGD struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
	// Compiled runs each step as one compiled function over every
	// parameter (as AdamW.Compiled: the momentum buffers and parameters
	// stored in place, multi-tensor kernels on a GPU), compiled once. A
	// step where some parameter has no gradient runs eagerly.
	Compiled bool

	params  []*tensor.Tensor
	bufs    []*tensor.Tensor
	started []bool // per parameter: whether a step has updated it
	stepper
}

// NewSGD returns an SGD over params (leaves that require gradients) with
// learning rate lr and no momentum; set the other fields before the first
// Step.
func NewSGD(params []*tensor.Tensor, lr float64) *SGD {
	return &SGD{LR: lr, params: params, bufs: make([]*tensor.Tensor, len(params)), started: make([]bool, len(params))}
}

// Step updates every parameter that has a gradient, in place.
func (o *SGD) Step() {
	r := o.rule()
	factors := func(i int) [3]float64 {
		mom, keep := o.momentum(o.started[i])
		return [3]float64{o.LR, mom, keep}
	}
	// Compiled, every parameter takes one step's factors: all at their
	// first step, or all past it.
	if o.Compiled && len(o.params) > 0 && !slices.Contains(o.started, !o.started[0]) && o.compiledStep(o.params, factors(0), r) {
		return
	}
	o.eager(o.params, factors, r)
}

// rule is SGD's step: the momentum buffers made on first use, each
// parameter's update (its factors lr, mom and keep).
func (o *SGD) rule() rule {
	return rule{
		prepare: func(i int) {
			if o.Momentum != 0 && o.bufs[i] == nil {
				o.bufs[i] = tensor.ZerosLike(o.params[i])
			}
			o.started[i] = true
		},
		update: func(i int, p, g *tensor.Tensor, f [3]*tensor.Tensor) { o.update(p, g, o.bufs[i], f[0], f[1], f[2]) },
	}
}

// update writes parameter p's SGD update for gradient g in place, with
// its momentum buffer buf (nil without momentum): lr, mom and keep are
// 0-d tensors, so that the compiled step takes them as arguments.
func (o *SGD) update(p, g, buf, lr, mom, keep *tensor.Tensor) {
	d := g
	if o.WeightDecay != 0 {
		d = d.Add(p.MulScalar(o.WeightDecay))
	}
	if buf != nil {
		buf.Copy(buf.Mul(mom).Add(d.Mul(keep)))
		if o.Nesterov {
			d = d.Add(buf.MulScalar(o.Momentum))
		} else {
			d = buf
		}
	}
	p.Copy(p.Sub(d.Mul(lr)))
}

// momentum gives the buffer update's factors, buf = mom·buf + keep·d: the
// buffer starts as a parameter's first d (mom 0, keep 1, from zeros).
func (o *SGD) momentum(started bool) (mom, keep float64) {
	if !started {
		return 0, 1
	}
	return o.Momentum, 1 - o.Dampening
}

// ZeroGrad clears every parameter's gradient.
func (o *SGD) ZeroGrad() { zeroGrad(o.params) }

// AdamW is Adam with decoupled weight decay, as torch.optim.AdamW computes
// it (without amsgrad): at step t,
//
//	p = p·(1 − LR·WeightDecay)
//	m = Beta1·m + (1 − Beta1)·g,  v = Beta2·v + (1 − Beta2)·g²
//	p = p − LR·(m / (1 − Beta1^t)) / (sqrt(v / (1 − Beta2^t)) + Eps)
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	// Compiled runs each step as one compiled function over every
	// parameter (tensor.Compile: a fused multi-tensor kernel that updates
	// each parameter and its moments in one pass, stored in place; see
	// the package documentation), compiled once; the learning rate and
	// the step's bias corrections are its tensor arguments. A step where
	// some parameter has no gradient runs eagerly.
	Compiled bool

	params []*tensor.Tensor
	m, v   []*tensor.Tensor
	t      int
	stepper
}

// NewAdamW returns an AdamW over params with learning rate lr and
// PyTorch's defaults: betas 0.9 and 0.999, eps 1e-8, weight decay 0.01.
func NewAdamW(params []*tensor.Tensor, lr float64) *AdamW {
	return &AdamW{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, params: params,
		m: make([]*tensor.Tensor, len(params)), v: make([]*tensor.Tensor, len(params))}
}

// Step updates every parameter that has a gradient, in place.
func (o *AdamW) Step() {
	o.t++
	c1 := 1 - math.Pow(o.Beta1, float64(o.t))
	c2 := 1 - math.Pow(o.Beta2, float64(o.t))
	r := o.rule()
	f := [3]float64{o.LR, c1, c2}
	if o.Compiled && o.compiledStep(o.params, f, r) {
		return
	}
	o.eager(o.params, func(int) [3]float64 { return f }, r)
}

// rule is AdamW's step: the moments made on first use, each parameter's
// update (its factors lr and the bias corrections c1, c2).
func (o *AdamW) rule() rule {
	return rule{
		prepare: func(i int) {
			if o.m[i] == nil {
				o.m[i], o.v[i] = tensor.ZerosLike(o.params[i]), tensor.ZerosLike(o.params[i])
			}
		},
		update: func(i int, p, g *tensor.Tensor, f [3]*tensor.Tensor) {
			o.update(p, g, o.m[i], o.v[i], f[0], f[1], f[2])
		},
	}
}

// update writes parameter p's AdamW update for gradient g in place, with
// its moments m and v: lr and the bias corrections c1, c2 are 0-d
// tensors, so that the compiled step takes them as arguments.
func (o *AdamW) update(p, g, m, v, lr, c1, c2 *tensor.Tensor) {
	m.Copy(m.MulScalar(o.Beta1).Add(g.MulScalar(1 - o.Beta1)))
	v.Copy(v.MulScalar(o.Beta2).Add(g.Mul(g).MulScalar(1 - o.Beta2)))
	denom := v.Div(c2).Sqrt().AddScalar(o.Eps)
	p.Copy(p.Sub(p.Mul(lr).MulScalar(o.WeightDecay)).Sub(m.Div(c1).Div(denom).Mul(lr)))
}

// ZeroGrad clears every parameter's gradient.
func (o *AdamW) ZeroGrad() { zeroGrad(o.params) }

func zeroGrad(params []*tensor.Tensor) {
	for _, p := range params {
		p.ZeroGrad()
	}
}

// ClipGradNorm scales the gradients of params so that their joint 2-norm
// is at most maxNorm, as torch.nn.utils.clip_grad_norm_ does (scaling by
// maxNorm / (norm + 1e-6) when that is below 1), and returns the norm
// before clipping.
func ClipGradNorm(params []*tensor.Tensor, maxNorm float64) float64 {
	var total float64
	tensor.NoGrad(func() {
		for _, p := range params {
			if g := p.Grad(); g != nil {
				total += g.To(tensor.Float64).Mul(g.To(tensor.Float64)).Sum().Item()
			}
		}
		total = math.Sqrt(total)
		if coef := maxNorm / (total + 1e-6); coef < 1 {
			for _, p := range params {
				if g := p.Grad(); g != nil {
					p.SetGrad(g.MulScalar(coef))
				}
			}
		}
	})
	return total
}
