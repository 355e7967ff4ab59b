//go:build !purego

package ir

//go:noescape
func binF32AVX2(op int, d, a, b *float32, n int)

// binOps numbers the primitives binF32AVX2 computes.
var binOps = [numPrims]int{PAdd: 1, PSub: 2, PMul: 3, PDiv: 4} // op+1; 0: none

// isArith reports whether p is an add, subtract, multiply or divide.
func isArith(p Prim) bool { return binOps[p] != 0 }

// vecF32 computes d = p(a, b) for a float32 add, subtract, multiply or
// divide with AVX2 (the same IEEE operations as floatLoop's, so the same
// bits) and reports whether it did.
func vecF32(p Prim, d, a, b []float32) bool {
	op := binOps[p] - 1
	if op < 0 || !hasAVX2 || len(d) < 8 {
		return false
	}
	a, b = a[:len(d)], b[:len(d)]
	binF32AVX2(op, &d[0], &a[0], &b[0], len(d))
	if i := len(d) &^ 7; i < len(d) {
		floatLoop(p, d[i:], a[i:], b[i:])
	}
	return true
}
