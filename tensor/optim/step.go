package optim

import "gocompile/tensor"

// stepper runs an optimizer's update of each parameter in place with the
// step's three factors as 0-d tensors (so that the compiled step takes
// them as arguments and every step replays one graph): eagerly, or as one
// compiled function over every parameter.
type stepper struct {
	compiled func(grads []*tensor.Tensor, f0, f1, f2 *tensor.Tensor) *tensor.Tensor
	stats    tensor.CompileStats // of compiled
	// last holds each factor's latest value and 0-d tensor, reused while
	// the value, type and device stay (a learning rate): no copy to the
	// device.
	last [3]struct {
		v float64
		t *tensor.Tensor
	}
}

// factor is factor j's value v as a 0-d tensor of p's type on p's device,
// made on the host and copied there (no kernel launch).
func (s *stepper) factor(j int, p *tensor.Tensor, v float64) *tensor.Tensor {
	l := &s.last[j]
	if l.t == nil || l.v != v || l.t.DType() != p.DType() || l.t.Device() != p.Device() {
		l.v, l.t = v, tensor.Scalar(v, p.DType()).ToDevice(p.Device())
	}
	return l.t
}

// rule is one optimizer's step: prepare makes parameter i's state before
// its update (idempotent); update writes parameter i (p, with gradient g)
// and its state in place with the factors f.
type rule struct {
	prepare func(i int)
	update  func(i int, p, g *tensor.Tensor, f [3]*tensor.Tensor)
	// guard, called while the compiled step is traced, guards the
	// hyperparameters update reads as Go values (tensor.Guard).
	guard func()
}

// eager updates every parameter that has a gradient, with the factors
// factors(i) gives it (read before its prepare).
func (s *stepper) eager(params []*tensor.Tensor, factors func(i int) [3]float64, r rule) {
	tensor.NoGrad(func() {
		scalars := map[[5]any][3]*tensor.Tensor{} // by device, type and factors
		for i, p := range params {
			g := p.Grad()
			if g == nil {
				continue
			}
			f := factors(i)
			k := [5]any{p.Device(), p.DType(), f[0], f[1], f[2]}
			sc, ok := scalars[k]
			if !ok {
				sc = [3]*tensor.Tensor{s.factor(0, p, f[0]), s.factor(1, p, f[1]), s.factor(2, p, f[2])}
				scalars[k] = sc
			}
			r.prepare(i)
			// Detached, no op on p asks whether to record gradients.
			r.update(i, p.Detach(), g, sc)
		}
	})
}

// compiledStep updates every parameter with factors f as one compiled
// function, compiled on first use, or reports false, doing nothing, when
// a parameter has no gradient.
func (s *stepper) compiledStep(params []*tensor.Tensor, f [3]float64, r rule) bool {
	if len(params) == 0 {
		return true
	}
	grads := make([]*tensor.Tensor, len(params))
	for i, p := range params {
		if grads[i] = p.Grad(); grads[i] == nil {
			return false
		}
	}
	for i := range params {
		r.prepare(i)
	}
	if s.compiled == nil {
		s.compiled = tensor.Compile(stepFunc(params, r), tensor.WithStats(&s.stats))
	}
	p := params[0]
	tensor.NoGrad(func() { s.compiled(grads, s.factor(0, p, f[0]), s.factor(1, p, f[1]), s.factor(2, p, f[2])) })
	return true
}

// stepFunc is the function compiledStep compiles: r's update of every
// parameter from its gradient, with the factors as 0-d tensors.
func stepFunc(params []*tensor.Tensor, r rule) func(grads []*tensor.Tensor, f0, f1, f2 *tensor.Tensor) *tensor.Tensor {
	return func(grads []*tensor.Tensor, f0, f1, f2 *tensor.Tensor) *tensor.Tensor {
		r.guard()
		for i, p := range params {
			r.update(i, p, grads[i], [3]*tensor.Tensor{f0, f1, f2})
		}
		return f0
	}
}
