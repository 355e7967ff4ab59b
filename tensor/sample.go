package tensor

import "math"

// Multinomial draws numSamples category indices (Int64) per row of t, a
// 1-D or 2-D tensor of non-negative weights (not necessarily normalised),
// as torch.multinomial, with the values of g, on t's device. With
// replacement each draw is independent; without, a category is drawn at
// most once (numSamples may not exceed the categories of non-zero weight
// in any row). The result is [numSamples] or [rows, numSamples].
//
// With replacement, a draw u·total (u uniform in [0, 1), total the row's
// sum) picks the first category whose running sum exceeds it. Without,
// each category gets the key -log(u)/weight and the numSamples smallest
// keys win (an exponential race: the same distribution as drawing one at
// a time and removing it). The weights are checked, which reads four
// numbers back from the device at once.
func (t *Tensor) Multinomial(numSamples int, replacement bool, g *Generator) *Tensor {
	t.must("Multinomial")
	g.must("Multinomial")
	shape := t.shape()
	if len(shape) != 1 && len(shape) != 2 {
		throw("Multinomial", []*Tensor{t}, "pass a vector of weights or a matrix of rows of them", "weights of %d dims", len(shape))
	}
	if !t.dtype().IsFloat() {
		throw("Multinomial", []*Tensor{t}, "cast the weights to a floating type, e.g. To(tensor.Float32)", "weights of type %v", t.dtype())
	}
	n := shape[len(shape)-1]
	if numSamples <= 0 || n == 0 || !replacement && numSamples > n {
		throw("Multinomial", []*Tensor{t}, "draw between 1 and the number of categories (any number with replacement)",
			"%d samples from %d categories, replacement %v", numSamples, n, replacement)
	}
	w := t
	if len(shape) == 1 {
		w = w.Unsqueeze(0)
	}
	if dt := w.dtype(); dt == Float16 || dt == BFloat16 {
		w = w.To(Float32)
	}
	rows := w.Size(0)
	// The weights must be finite and non-negative, each row's sum positive;
	// without replacement, each row needs numSamples non-zero weights. The
	// four numbers come back from the device in one read.
	rowSums := w.Sum(-1)
	nonZero := w.GtScalar(0).Sum(-1).Min().To(w.dtype())
	stats := Stack([]*Tensor{w.Min(), rowSums.Min(), rowSums.Max(), nonZero}, 0).Float64s()
	low, minSum, maxSum, nz := stats[0], stats[1], stats[2], stats[3]
	if !(low >= 0) || !(minSum > 0) || math.IsInf(maxSum, 0) {
		throw("Multinomial", []*Tensor{t}, "give finite, non-negative weights with a positive sum in every row",
			"smallest weight %g, smallest row sum %g", low, minSum)
	}
	var idx *Tensor
	if replacement {
		u := g.Rand(w.dtype(), rows, numSamples).ToDevice(w.Device())
		cdf := w.CumSum(-1)                                // [rows, n]
		target := u.Mul(rowSums.Unsqueeze(-1))             // [rows, S]
		below := cdf.Unsqueeze(1).Le(target.Unsqueeze(-1)) // [rows, S, n]: running sums not above the draw
		idx = below.Sum(-1).MinimumScalar(float64(n - 1))
	} else {
		if int(nz) < numSamples {
			throw("Multinomial", []*Tensor{t}, "draw at most as many samples as categories of non-zero weight, or use replacement",
				"%d samples without replacement from a row with %d non-zero weights", numSamples, int(nz))
		}
		// Keys for every category: n draws a row.
		e := g.Rand(w.dtype(), rows, n).ToDevice(w.Device())
		keys := e.Log().Neg().Div(w) // zero weights: +Inf, never drawn while others remain
		_, idx = keys.TopK(numSamples, -1, false)
	}
	if len(shape) == 1 {
		idx = idx.Squeeze(0)
	}
	return idx
}
