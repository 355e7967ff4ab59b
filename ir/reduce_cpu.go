package ir

import "unsafe"

// Fast paths of Accumulate for floating values.

// sumFloat is the float64 sum of x in a fixed order that vector units run
// fast: sixteen partial sums, value i going to partial i%16, then combined
// pairwise, (0+8, 1+9, …), then (0+4, …), then (0+2)+(1+3). Every
// platform computes the same bits (sumLanes is a vector loop where there
// is one), and sixteen partial sums round less than one.
func sumFloat[T floating](x []T) float64 { return sumWith(x, true) }

// sumWith is sumFloat, with the vector loop where there is one if vector.
func sumWith[T floating](x []T, vector bool) float64 {
	var s [16]float64
	var i int
	if vector {
		i = sumLanes(x, &s)
	} else {
		i = sumLanesGo(x, &s)
	}
	for j, v := range x[i:] { // fewer than sixteen
		s[j] += float64(v)
	}
	var t [8]float64
	for j := range t {
		t[j] = s[j] + s[j+8]
	}
	var c [4]float64
	for j := range c {
		c[j] = t[j] + t[j+4]
	}
	return (c[0] + c[2]) + (c[1] + c[3])
}

// sumLanesGo is sumLanes in Go.
func sumLanesGo[T floating](x []T, s *[16]float64) int {
	n := len(x) &^ 15
	for i := 0; i < n; i += 16 {
		y := x[i : i+16 : i+16]
		for j := range s {
			s[j] += float64(y[j])
		}
	}
	return n
}

// bestFloat finds the greatest (greater) or least value of x, which holds
// no NaN, and the index of its first occurrence, comparing four lanes at a
// time. ok is false when x holds a NaN, which the caller's loop handles.
func bestFloat[T floating](x []T, greater bool) (best T, at int, ok bool) {
	if len(x) < 8 {
		return 0, 0, false
	}
	var m [4]T
	var idx [4]int
	for j := range m {
		m[j], idx[j] = x[j], j
		if x[j] != x[j] {
			return 0, 0, false
		}
	}
	i := 4
	if greater {
		for ; i+4 <= len(x); i += 4 {
			y := x[i : i+4 : i+4]
			for j := range m {
				if v := y[j]; v > m[j] {
					m[j], idx[j] = v, i+j
				} else if v != v {
					return 0, 0, false
				}
			}
		}
	} else {
		for ; i+4 <= len(x); i += 4 {
			y := x[i : i+4 : i+4]
			for j := range m {
				if v := y[j]; v < m[j] {
					m[j], idx[j] = v, i+j
				} else if v != v {
					return 0, 0, false
				}
			}
		}
	}
	for ; i < len(x); i++ { // the tail joins lane 0
		if v := x[i]; greater && v > m[0] || !greater && v < m[0] {
			m[0], idx[0] = v, i
		} else if v != v {
			return 0, 0, false
		}
	}
	// The best lane; among equal values (+0 and -0) the first index, whose
	// value is the one a loop in order keeps.
	best, at = m[0], idx[0]
	for j := 1; j < 4; j++ {
		if greater && m[j] > best || !greater && m[j] < best || m[j] == best && idx[j] < at {
			best, at = m[j], idx[j]
		}
	}
	return best, at, true
}

// asFloat is x as a []F, for x whose element type is F.
func asFloat[F floating, T number](x []T) []F {
	return unsafe.Slice((*F)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// AddWidened adds x[j], widened to float64, into l[j] for j < len(x): one
// step of a sum's lane (see Accumulate) for many outputs side by side.
func AddWidened[T floating](l []float64, x []T) {
	l = l[:len(x)]
	for j := addWidenedLanes(l, x); j < len(x); j++ {
		l[j] += float64(x[j])
	}
}

// SumBlocks folds the float sum of x into acc as Accumulate over its
// blocks of size values would, one block after another (so with the same
// result), in one call where there is a vector loop.
func SumBlocks[T floating](r Reducer, acc *Acc, x []T, base int64, size int) {
	f, done := sumBlocksVec(x, size, acc.F)
	if done > 0 {
		acc.F, acc.Count = f, acc.Count+int64(done)
	}
	for i := done; i < len(x); i += size {
		Accumulate(r, acc, x[i:min(i+size, len(x))], base+int64(i))
	}
}
