package optim

import (
	"fmt"
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
	// startedT holds started[i] as a 0-d tensor (1 or 0) once a step of
	// parameter i was traced (tracedStep): from then on it is the flag.
	startedT []*tensor.Tensor
	stepper
}

// NewSGD returns an SGD over params (leaves that require gradients) with
// learning rate lr and no momentum; set the other fields before the first
// Step.
func NewSGD(params []*tensor.Tensor, lr float64) *SGD {
	return &SGD{LR: lr, params: params, bufs: make([]*tensor.Tensor, len(params)), started: make([]bool, len(params)),
		startedT: make([]*tensor.Tensor, len(params))}
}

// sgdHyper are the values an SGD step computes with.
type sgdHyper struct {
	lr, momentum, dampening, weightDecay float64
	nesterov                             bool
}

func (o *SGD) hyper() sgdHyper {
	return sgdHyper{o.LR, o.Momentum, o.Dampening, o.WeightDecay, o.Nesterov}
}

// sameBut reports whether h and g agree but for the learning rate, which
// the Compiled step takes as an argument.
func (h sgdHyper) sameBut(g sgdHyper) bool {
	h.lr = g.lr
	return h == g
}

// Step updates every parameter that has a gradient, in place. Inside a
// compiled function it is traced, with its state in tensors (tracedStep).
func (o *SGD) Step() {
	if tensor.Compiling() {
		o.tracedStep()
		return
	}
	// Traced steps keep the flags in tensors: a flag still unset here is
	// read from its tensor, and set there too if this step sets it.
	var unset []int
	for i, s := range o.startedT {
		if s != nil && !o.started[i] {
			if o.started[i] = s.Item() != 0; !o.started[i] {
				unset = append(unset, i)
			}
		}
	}
	defer func() {
		for _, i := range unset {
			if o.started[i] {
				o.startedT[i].Fill(1)
			}
		}
	}()
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

// tracedStep is Step inside a compiled function, whose Go code runs only
// while it is traced: whether each parameter has started is a 0-d tensor
// the graph reads and sets, the learning rate is read on every call
// (tensor.ScalarFunc: a schedule needs no recompiling), and the other
// hyperparameters are guarded (a new value compiles the function again).
func (o *SGD) tracedStep() {
	h := o.hyper()
	tensor.Guard("SGD's hyperparameters", func() bool { return o.hyper().sameBut(h) })
	tensor.NoGrad(func() {
		key, readLR := fmt.Sprintf("SGD %p LR", o), func() float64 { return o.LR }
		for i, p := range o.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			// Read on every call; one input per type and device.
			lr := tensor.ScalarFunc(key, readLR, p.DType(), p.Device())
			mom, keep := lr, lr // unused without momentum
			if o.Momentum != 0 {
				if o.bufs[i] == nil {
					o.bufs[i] = tensor.ZerosLike(p)
				}
				s := o.startedT[i]
				if s == nil {
					v := 0.0
					if o.started[i] {
						v = 1
					}
					s = tensor.Scalar(v, p.DType()).ToDevice(p.Device())
					o.startedT[i] = s
				}
				// started: mom = Momentum, keep = 1 − Dampening; else 0 and 1.
				mom, keep = s.MulScalar(o.Momentum), s.MulScalar(-o.Dampening).AddScalar(1)
				s.Fill(1)
			}
			o.update(p.Detach(), g, o.bufs[i], lr, mom, keep)
		}
	})
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
		guard: func() {
			h := o.hyper()
			tensor.Guard("SGD's hyperparameters", func() bool { return o.hyper().sameBut(h) })
		},
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
	// stepT holds t as a 0-d float64 tensor once a step was traced
	// (tracedStep): from then on it is the count.
	stepT *tensor.Tensor
	stepper
}

// adamHyper are the values an AdamW step computes with.
type adamHyper struct{ lr, beta1, beta2, eps, weightDecay float64 }

func (o *AdamW) hyper() adamHyper {
	return adamHyper{o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay}
}

// sameBut reports whether h and g agree but for the learning rate, which
// the Compiled step takes as an argument.
func (h adamHyper) sameBut(g adamHyper) bool {
	h.lr = g.lr
	return h == g
}

// NewAdamW returns an AdamW over params with learning rate lr and
// PyTorch's defaults: betas 0.9 and 0.999, eps 1e-8, weight decay 0.01.
func NewAdamW(params []*tensor.Tensor, lr float64) *AdamW {
	return &AdamW{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, params: params,
		m: make([]*tensor.Tensor, len(params)), v: make([]*tensor.Tensor, len(params))}
}

// Step updates every parameter that has a gradient, in place. Inside a
// compiled function it is traced, with its step count in a tensor
// (tracedStep).
func (o *AdamW) Step() {
	if tensor.Compiling() {
		o.tracedStep()
		return
	}
	if o.stepT != nil { // traced steps keep the count in a tensor
		o.t = int(o.stepT.Item())
		defer func() { o.stepT.Fill(float64(o.t)) }()
	}
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

// tracedStep is Step inside a compiled function, whose Go code runs only
// while it is traced: the step count is a 0-d tensor on the parameters'
// device that the graph increments, and the bias corrections 1 − β^t are
// computed from it in the graph (torch's capturable state); the learning
// rate is read on every call (tensor.ScalarFunc), and the other
// hyperparameters are guarded (a new value compiles the function again).
func (o *AdamW) tracedStep() {
	if len(o.params) == 0 {
		return
	}
	h := o.hyper()
	tensor.Guard("AdamW's hyperparameters", func() bool { return o.hyper().sameBut(h) })
	tensor.NoGrad(func() {
		dev := o.params[0].Device()
		if o.stepT == nil || o.stepT.Device() != dev {
			o.stepT = tensor.Scalar(float64(o.t), tensor.Float64).ToDevice(dev)
		}
		t := o.stepT.AddScalar(1)
		o.stepT.Copy(t)
		c1 := tensor.Scalar(o.Beta1, tensor.Float64).ToDevice(dev).Pow(t).Neg().AddScalar(1)
		c2 := tensor.Scalar(o.Beta2, tensor.Float64).ToDevice(dev).Pow(t).Neg().AddScalar(1)
		key, readLR := fmt.Sprintf("AdamW %p LR", o), func() float64 { return o.LR }
		for i, p := range o.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			if o.m[i] == nil {
				o.m[i], o.v[i] = tensor.ZerosLike(p), tensor.ZerosLike(p)
			}
			// The learning rate is read on every call, one input per type and
			// device; the graph's CSE merges the casts of c1 and c2.
			o.update(p.Detach(), g, o.m[i], o.v[i], tensor.ScalarFunc(key, readLR, p.DType(), p.Device()), c1.To(p.DType()), c2.To(p.DType()))
		}
	})
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
		guard: func() {
			h := o.hyper()
			tensor.Guard("AdamW's hyperparameters", func() bool { return o.hyper().sameBut(h) })
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
// before clipping. Returning a number, it waits for the gradients; inside
// a compiled step that is a graph break: use ClipGradNormTensor there.
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

// ClipGradNormTensor is ClipGradNorm that reads nothing back, as
// torch.nn.utils.clip_grad_norm_: it scales the gradients of params by
// min(1, maxNorm / (norm + 1e-6)) with tensor ops and returns the norm as
// a 0-d float64 tensor on the first gradient's device (a CPU zero when no
// parameter has one). Inside a compiled training step it stays in the
// graph, where ClipGradNorm's float64 result would break it.
func ClipGradNormTensor(params []*tensor.Tensor, maxNorm float64) *tensor.Tensor {
	var total *tensor.Tensor
	tensor.NoGrad(func() {
		var dev tensor.Device
		for _, p := range params {
			g := p.Grad()
			if g == nil {
				continue
			}
			if total == nil {
				dev = g.Device()
			}
			g64 := g.To(tensor.Float64)
			sq := g64.Mul(g64).Sum().ToDevice(dev)
			if total == nil {
				total = sq
			} else {
				total = total.Add(sq)
			}
		}
		if total == nil {
			total = tensor.Scalar(0, tensor.Float64)
			return
		}
		total = total.Sqrt()
		limit := tensor.Scalar(maxNorm, tensor.Float64).ToDevice(total.Device())
		coef := limit.Div(total.AddScalar(1e-6)).MinimumScalar(1)
		for _, p := range params {
			if g := p.Grad(); g != nil {
				p.SetGrad(g.Mul(coef.To(g.DType()).ToDevice(g.Device())))
			}
		}
	})
	return total
}
