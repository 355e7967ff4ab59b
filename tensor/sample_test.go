package tensor

import (
	"math"
	"slices"
	"testing"
)

// Multinomial with replacement draws each category in proportion to its
// weight (zero weights never), rows independently; the same seed gives
// the same draws.
func TestMultinomialWithReplacement(t *testing.T) {
	weights := [][]float64{{0.2, 0, 0.6, 1.2}, {5, 1, 0, 4}}
	const draws = 200000
	for _, dt := range floatTypes {
		w := build(slices.Concat(weights...), dt, []int{2, 4})
		got := w.Multinomial(draws, true, NewGenerator(42))
		if got.DType() != Int64 || !shapeEq(got.Shape(), []int{2, draws}) {
			t.Fatalf("%v: %v %v", dt, got.DType(), got.Shape())
		}
		idx := ivals(got)
		for r, row := range weights {
			total := 0.0
			for _, v := range row {
				total += v
			}
			counts := make([]int, 4)
			for _, i := range idx[r*draws : (r+1)*draws] {
				counts[i]++
			}
			for c, v := range row {
				p := v / total
				sigma := math.Sqrt(draws * p * (1 - p))
				if math.Abs(float64(counts[c])-draws*p) > 5*sigma+1 {
					t.Errorf("%v row %d: category %d drawn %d times, want about %.0f", dt, r, c, counts[c], draws*p)
				}
			}
		}
		again := w.Multinomial(draws, true, NewGenerator(42))
		checkSame(t, dt.String()+": the same seed", again, got)
	}
	// A vector of weights gives a vector of draws.
	if s := FromSlice([]float32{1, 2}).Multinomial(3, true, NewGenerator(1)).Shape(); !shapeEq(s, []int{3}) {
		t.Errorf("vector weights: shape %v", s)
	}
}

// Without replacement no category repeats, zero weights come last, and the
// first draw follows the weights.
func TestMultinomialWithoutReplacement(t *testing.T) {
	row := []float64{0.5, 0, 1.5, 2}
	const rows = 40000
	w := FromSlice(row).Unsqueeze(0).Expand(rows, 4).Contiguous()
	got := w.Multinomial(3, false, NewGenerator(7))
	idx := ivals(got)
	first := make([]int, 4)
	for r := range rows {
		drawn := idx[3*r : 3*r+3]
		seen := map[int64]bool{}
		for _, i := range drawn {
			if seen[i] || i == 1 {
				t.Fatalf("row %d: draws %v repeat or take the zero weight", r, drawn)
			}
			seen[i] = true
		}
		first[drawn[0]]++
	}
	for c, v := range row {
		p := v / 4
		sigma := math.Sqrt(rows * p * (1 - p))
		if math.Abs(float64(first[c])-rows*p) > 5*sigma+1 {
			t.Errorf("first draw of category %d: %d times, want about %.0f", c, first[c], rows*p)
		}
	}
}

func TestMultinomialErrors(t *testing.T) {
	g := NewGenerator(1)
	for _, c := range []struct {
		what string
		f    func()
	}{
		{"a negative weight", func() { FromSlice([]float32{1, -1}).Multinomial(1, true, g) }},
		{"a zero row", func() { FromSlice([]float32{0, 0}).Multinomial(1, true, g) }},
		{"NaN", func() { FromSlice([]float32{1, float32(math.NaN())}).Multinomial(1, true, g) }},
		{"too many without replacement", func() { FromSlice([]float32{1, 0, 1}).Multinomial(3, false, g) }},
		{"integer weights", func() { FromSlice([]int64{1, 2}).Multinomial(1, true, g) }},
		{"3-D weights", func() { Ones(Float32, 2, 2, 2).Multinomial(1, true, g) }},
		{"no samples", func() { Ones(Float32, 3).Multinomial(0, true, g) }},
		{"a nil generator", func() { Ones(Float32, 3).Multinomial(1, true, nil) }},
	} {
		expectError(t, c.what, c.f)
	}
}

// One generator shared by goroutines hands each draw the next values of
// its one sequence: together they take exactly the values one goroutine
// would, in some order.
func TestGeneratorConcurrent(t *testing.T) {
	const workers, each = 8, 500
	shared := NewGenerator(3)
	results := make(chan []float64, workers)
	for range workers {
		go func() { results <- vals(shared.Rand(Float64, each)) }()
	}
	var got []float64
	for range workers {
		got = append(got, <-results...)
	}
	want := vals(NewGenerator(3).Rand(Float64, workers*each))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Error("concurrent draws are not the sequence's values")
	}
}
