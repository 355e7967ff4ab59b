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
// bits) and reports whether it did. bcast 1 means b is one value, b[0]
// for every element; 2 means a is.
func vecF32(p Prim, d, a, b []float32, bcast int) bool {
	op := binOps[p] - 1
	if op < 0 || !hasAVX2 || len(d) < 8 {
		return false
	}
	n := len(d)
	switch bcast {
	case 0:
		a, b = a[:n], b[:n]
	case 1:
		a, b = a[:n], b[:1]
	case 2:
		a, b = a[:1], b[:n]
	}
	binF32AVX2(op+4*bcast, &d[0], &a[0], &b[0], n)
	if i := n &^ 7; i < n {
		switch bcast {
		case 0:
			floatLoop(p, d[i:], a[i:], b[i:])
		case 1:
			arithScalar(p, d[i:], a[i:], b[0], false)
		case 2:
			arithScalar(p, d[i:], b[i:], a[0], true)
		}
	}
	return true
}
