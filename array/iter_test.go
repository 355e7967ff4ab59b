package array

import "testing"

// A panic in one of split's workers reaches the caller's goroutine, where
// it can be recovered, and the other workers stop taking ranges.
func TestSplitPanicReachesCaller(t *testing.T) {
	var got any
	func() {
		defer func() { got = recover() }()
		ParallelRows(1000, 1, func(lo, hi int) {
			if lo <= 500 && 500 < hi {
				panic("row 500")
			}
		})
	}()
	if got != "row 500" {
		t.Errorf("recovered %v, want the worker's panic", got)
	}
}
