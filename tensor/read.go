package tensor

// Reading values back. Each method returns a new slice in row-major order
// of t's shape, whatever t's layout, converted to the slice's type.

// Float32s returns the elements as float32.
func (t *Tensor) Float32s() []float32 {
	defer rethrow()
	t.must("Float32s")
	if t.px != nil {
		return t.materialize("Float32s").Float32s()
	}
	flushWrites(t, "Float32s")
	return t.v.Float32s()
}

// Float64s returns the elements as float64.
func (t *Tensor) Float64s() []float64 {
	defer rethrow()
	t.must("Float64s")
	if t.px != nil {
		return t.materialize("Float64s").Float64s()
	}
	flushWrites(t, "Float64s")
	return t.v.Float64s()
}

// Int64s returns the elements as int64 (floating values truncate toward
// zero).
func (t *Tensor) Int64s() []int64 {
	defer rethrow()
	t.must("Int64s")
	if t.px != nil {
		return t.materialize("Int64s").Int64s()
	}
	flushWrites(t, "Int64s")
	return t.v.Int64s()
}

// Bools returns the elements as bool (non-zero is true).
func (t *Tensor) Bools() []bool {
	defer rethrow()
	t.must("Bools")
	if t.px != nil {
		return t.materialize("Bools").Bools()
	}
	flushWrites(t, "Bools")
	return t.v.Bools()
}

// Item returns the value of a one-element tensor as a float64.
func (t *Tensor) Item() float64 {
	t.must("Item")
	if t.px != nil {
		return t.materialize("Item").Item()
	}
	if t.Numel() != 1 {
		panic(errorf("Item", [][]int{t.shape()}, "reduce the tensor first (Sum, Max …) or index one element with At",
			"only a one-element tensor has an item, this one has %d", t.Numel()))
	}
	idx := make([]int, len(t.shape()))
	return t.At(idx...)
}
