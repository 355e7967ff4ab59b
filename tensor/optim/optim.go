package optim

import (
	"math"

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
	step    func(grads []*tensor.Tensor, lr, mom, keep *tensor.Tensor) *tensor.Tensor
	stats   tensor.CompileStats // of step
}

// NewSGD returns an SGD over params (leaves that require gradients) with
// learning rate lr and no momentum; set the other fields before the first
// Step.
func NewSGD(params []*tensor.Tensor, lr float64) *SGD {
	return &SGD{LR: lr, params: params, bufs: make([]*tensor.Tensor, len(params)), started: make([]bool, len(params))}
}

// Step updates every parameter that has a gradient, in place.
func (o *SGD) Step() {
	if o.Compiled && o.compiledStep() {
		return
	}
	tensor.NoGrad(func() {
		scalars := map[[3]any][3]*tensor.Tensor{} // by device, type and start
		for i, p := range o.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			o.buffer(i)
			k := [3]any{p.Device(), p.DType(), o.started[i]}
			sc, ok := scalars[k]
			if !ok {
				mom, keep := o.momentum(o.started[i])
				sc = [3]*tensor.Tensor{scalarLike(p, o.LR), scalarLike(p, mom), scalarLike(p, keep)}
				scalars[k] = sc
			}
			o.started[i] = true
			// Detached, no op on p asks whether to record gradients.
			o.update(p.Detach(), g, o.bufs[i], sc[0], sc[1], sc[2])
		}
	})
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

// buffer makes parameter i's momentum buffer (zeros) on its first step,
// where there is momentum.
func (o *SGD) buffer(i int) {
	if o.Momentum != 0 && o.bufs[i] == nil {
		o.bufs[i] = tensor.ZerosLike(o.params[i])
	}
}

// compiledStep runs the step as the compiled function, or reports false
// when a parameter has no gradient or the parameters are not all at their
// first step or all past it.
func (o *SGD) compiledStep() bool {
	grads := make([]*tensor.Tensor, len(o.params))
	for i, p := range o.params {
		if grads[i] = p.Grad(); grads[i] == nil || o.started[i] != o.started[0] {
			return false
		}
	}
	mom, keep := o.momentum(o.started[0])
	for i := range o.started {
		o.started[i] = true
	}
	if o.step == nil {
		for i := range o.params {
			o.buffer(i)
		}
		o.step = tensor.Compile(func(grads []*tensor.Tensor, lr, mom, keep *tensor.Tensor) *tensor.Tensor {
			for i, p := range o.params {
				o.update(p, grads[i], o.bufs[i], lr, mom, keep)
			}
			return lr
		}, tensor.WithStats(&o.stats))
	}
	p := o.params[0]
	tensor.NoGrad(func() { o.step(grads, scalarLike(p, o.LR), scalarLike(p, mom), scalarLike(p, keep)) })
	return true
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
	// parameter (tensor.Compile: the updates fused, the moments and
	// parameters stored in place; on a GPU, multi-tensor kernels for
	// parameters up to a million elements, up to 32 tensors a launch),
	// compiled once; the learning rate and
	// the step's bias corrections are its tensor arguments. A step where
	// some parameter has no gradient runs eagerly.
	Compiled bool

	params []*tensor.Tensor
	m, v   []*tensor.Tensor
	t      int
	step   func(grads []*tensor.Tensor, lr, c1, c2 *tensor.Tensor) *tensor.Tensor
	stats  tensor.CompileStats // of step
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
	if o.Compiled && o.compiledStep(c1, c2) {
		return
	}
	tensor.NoGrad(func() {
		scalars := map[[2]any][3]*tensor.Tensor{} // by device and type
		for i, p := range o.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			o.moments(i)
			k := [2]any{p.Device(), p.DType()}
			sc, ok := scalars[k]
			if !ok {
				sc = [3]*tensor.Tensor{scalarLike(p, o.LR), scalarLike(p, c1), scalarLike(p, c2)}
				scalars[k] = sc
			}
			// Detached, no op on p asks whether to record gradients.
			o.update(p.Detach(), g, o.m[i], o.v[i], sc[0], sc[1], sc[2])
		}
	})
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

// moments makes parameter i's moments (zeros) on its first step.
func (o *AdamW) moments(i int) {
	if o.m[i] == nil {
		o.m[i], o.v[i] = tensor.ZerosLike(o.params[i]), tensor.ZerosLike(o.params[i])
	}
}

// scalarLike is v as a 0-d tensor of p's type on p's device.
func scalarLike(p *tensor.Tensor, v float64) *tensor.Tensor {
	return tensor.FromSlice([]float64{v}).Reshape().To(p.DType()).ToDevice(p.Device())
}

// ZeroGrad clears every parameter's gradient.
func (o *AdamW) ZeroGrad() { zeroGrad(o.params) }

// compiledStep runs the step with bias corrections c1, c2 as the compiled
// function, or reports false when a parameter has no gradient.
func (o *AdamW) compiledStep(c1, c2 float64) bool {
	grads := make([]*tensor.Tensor, len(o.params))
	for i, p := range o.params {
		if grads[i] = p.Grad(); grads[i] == nil {
			return false
		}
	}
	if o.step == nil {
		for i := range o.params {
			o.moments(i)
		}
		o.step = tensor.Compile(func(grads []*tensor.Tensor, lr, c1, c2 *tensor.Tensor) *tensor.Tensor {
			for i, p := range o.params {
				o.update(p, grads[i], o.m[i], o.v[i], lr, c1, c2)
			}
			return lr
		}, tensor.WithStats(&o.stats))
	}
	p := o.params[0]
	tensor.NoGrad(func() { o.step(grads, scalarLike(p, o.LR), scalarLike(p, c1), scalarLike(p, c2)) })
	return true
}

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
