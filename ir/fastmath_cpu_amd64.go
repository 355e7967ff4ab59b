//go:build !purego

package ir

import "math"

// AVX2 loops for the FastMath primitives, where the processor has AVX2
// (and the operating system saves its registers). They compute each lane
// with the same float32 operations in the same order as the Go loops, so
// the results are the same bits either way; only speed differs.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax uint32)

//go:noescape
func expAVX2(d, a *float32, n int, c *[expRows][8]float32, pre, post float32, recip bool) int

//go:noescape
func erfAVX2(d, a *float32, n int, tab *[9][24]float32, c *[erfRows][8]float32, pre, post float32, recip bool) int

//go:noescape
func tanhAVX2(d, a *float32, n int, tab *[8][24]float32, c *[tanhRows][8]float32, pre, post float32, recip bool) int

var hasAVX2 = func() bool {
	if max, _, _, _ := cpuid(0, 0); max < 7 {
		return false
	}
	_, _, ecx, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx&osxsave == 0 || ecx&avx == 0 || xgetbv0()&6 != 6 { // the OS saves XMM and YMM state
		return false
	}
	_, ebx, _, _ := cpuid(7, 0)
	return ebx&(1<<5) != 0
}()

// expRows is the number of constant rows expAVX2 reads.
const expRows = 14

// expConsts are expAVX2's constants, each repeated over eight lanes, at
// the offsets the assembly names.
var expConsts = func() (c [expRows][8]float32) {
	rows := [expRows]float32{
		log2e, roundMag, ln2Hi, ln2Lo,
		exp2, exp3, exp4, exp5, exp6, exp7,
		1, -87, 88,
		math.Float32frombits(127), // k + 127, added as an integer
	}
	for i, v := range rows {
		c[i] = splat(v)
	}
	return c
}()

// splat is v in each of eight lanes.
func splat(v float32) [8]float32 { return [8]float32{v, v, v, v, v, v, v, v} }

// splatBits is rows of lanes, row i holding the float32 of bits[i] in
// each lane (the constants the assembly reads as integers or floats).
func splatBits(rows [][8]float32, bits ...uint32) {
	for i, b := range bits {
		rows[i] = splat(math.Float32frombits(b))
	}
}

// byCoef sets t[q][seg] to coefficient q of segment seg of tab, the last
// segment repeated past the table's end, for lookups by permutes.
func byCoef[Row [8]float32 | [9]float32](t [][24]float32, tab []Row) {
	for q := range t {
		for seg := range 24 {
			t[q][seg] = tab[min(seg, len(tab)-1)][q]
		}
	}
}

// expF32 sets d[i] = e^a[i] for i < len(d), with ar around it.
func expF32(d, a []float32, ar around) {
	a = a[:len(d)]
	if !hasAVX2 {
		expF32Go(d, a, ar)
		return
	}
	for i := 0; i < len(d); {
		if len(d)-i < 8 {
			expF32Go(d[i:], a[i:], ar)
			return
		}
		i += expAVX2(&d[i], &a[i], len(d)-i, &expConsts, ar.pre, ar.post, ar.recip)
		if i+8 <= len(d) { // a group with an edge input, the Go loop's
			expF32Go(d[i:i+8], a[i:i+8], ar)
			i += 8
		}
	}
}

// erfRows is the number of constant rows erfAVX2 reads.
const erfRows = 9

// erfConsts are erfAVX2's constants, each repeated over eight lanes.
var erfConsts = func() (c [erfRows][8]float32) {
	splatBits(c[:],
		0x7fffffff, 1<<31, 0x3f800000, // |x|, the sign, 1
		0x3e800000, 1, uint32(len(erfTab)-1), 7, // segment: bits of 1/4, 1, the last, 7
		math.Float32bits(erfOne), math.Float32bits(1))
	return c
}()

// erfCols holds erfTab by coefficient: row q has coefficient q of segments
// 0 to 7, of 8 to 15, then of 16 eight times, for lookups by permutes.
var erfCols = func() (t [9][24]float32) {
	byCoef(t[:], erfTab[:])
	return t
}()

// erfF32 sets d[i] = erf(a[i]) for i < len(d), with ar around it.
func erfF32(d, a []float32, ar around) {
	a = a[:len(d)]
	i := 0
	if hasAVX2 && len(d) >= 8 {
		i = erfAVX2(&d[0], &a[0], len(d), &erfCols, &erfConsts, ar.pre, ar.post, ar.recip)
	}
	erfF32Go(d[i:], a[i:], ar)
}

// tanhRows is the number of constant rows tanhAVX2 reads.
const tanhRows = 10

// tanhConsts are tanhAVX2's constants, each repeated over eight lanes.
var tanhConsts = func() (c [tanhRows][8]float32) {
	splatBits(c[:],
		0x7fffffff, 1<<31, 0x3f800000, // |x|, the sign, 1
		0x3e800000, 1, uint32(len(tanhTab)-1), 7, // segment: bits of 1/4, 1, the last, 7
		math.Float32bits(tanhOne), math.Float32bits(1), 15)
	return c
}()

// tanhCols holds tanhTab by coefficient: row q has coefficient q of
// segments 0 to 23 (the last repeated past the table's end).
var tanhCols = func() (t [8][24]float32) {
	byCoef(t[:], tanhTab[:])
	return t
}()

// tanhF32 sets d[i] = tanh(a[i]) for i < len(d), with ar around it.
func tanhF32(d, a []float32, ar around) {
	a = a[:len(d)]
	i := 0
	if hasAVX2 && len(d) >= 8 {
		i = tanhAVX2(&d[0], &a[0], len(d), &tanhCols, &tanhConsts, ar.pre, ar.post, ar.recip)
	}
	tanhF32Go(d[i:], a[i:], ar)
}
