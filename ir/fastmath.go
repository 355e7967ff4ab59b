package ir

import "math"

// Fast float32 transcendentals for compiled blocks (see FastMath).
//
// Each loop maps a slice of float32 to a slice of float32 with float32
// arithmetic only: a range reduction (Cody and Waite's for exp and log, a
// table of segments for erf and tanh) and a polynomial evaluated by
// Estrin's scheme, whose shorter dependency chains let the processor
// overlap more elements than Horner's rule. The coefficients were fitted
// for this file: minimax in relative error by Lawson's algorithm
// (iteratively reweighted least squares) against 120-bit reference values,
// then rounded to float32 one at a time, refitting the others after each.
// A loop calls nothing per element except on inputs outside its reduced
// range (exp where the result overflows, is subnormal or underflows; log of
// zeros, subnormals, negative numbers, infinities), which take the exact
// path, float32(math.F(float64(x))), out of line.
//
// Error bounds in float32 ulps of the exact result (the ulp of values
// below 2^-126 is 2^-149), for every float32 input: TestFastMathExhaustive
// checks all 2^32 of them (set GOCOMPILE_FASTMATH_EXHAUSTIVE=1; the worst
// case found is in brackets), TestFastMath a dense sweep on every run.
//
//	expF32   1 ulp    [0.965]
//	logF32   1 ulp    [0.840]
//	erfF32   2 ulps   [0.971]
//	tanhF32  2 ulps   [1.380]
//
// Special values are exact: NaN gives NaN; exp(+Inf) = +Inf, exp(-Inf) =
// 0, exp overflows to +Inf and underflows through the subnormals to 0;
// log(±0) = -Inf, log(x < 0) = NaN, log(+Inf) = +Inf; erf and tanh are odd
// (-0 stays -0) and ±1 at ±Inf and wherever the float32 result rounds to
// ±1.
//
// On amd64 with AVX2, exp, erf and tanh run eight lanes at a time
// (fastmath_cpu_amd64.s) with the same float32 operations in the same
// order as the Go loops, so with the same bits; the Go loops convert each
// product to float32 so that no platform fuses it into a multiply-add.
//
// The bounds were found on amd64, where Go rounds every product before
// adding it. On arm64, ppc64le, riscv64 and s390x the compiler may fuse
// a*b+c into one rounding in log's loop, which can change last bits
// there; TestFastMath checks the bounds on every platform it runs on.

// around is what a FastMath loop computes around its function f: y =
// f(x·pre) + post, then 1/y if recip, each step rounded to float32 as the
// separate primitives round it, so that CompileBlock can fold a negation
// or a scaling of f's operand and the usual 1 + f(x) and 1/(1 + f(x)) of
// sigmoid and GELU into f's loop without changing a bit. The identity is
// noAround.
type around struct {
	pre, post float32
	recip     bool
}

var noAround = around{pre: 1, post: float32(math.Copysign(0, -1))} // y + -0 is y, also for y = -0

// fastLoops are the FastMath loops of the float32 primitives that have one.
var fastLoops = [numPrims]func(d, a []float32, ar around){
	PExp:  expF32,
	PLog:  logF32,
	PTanh: tanhF32,
	PErf:  erfF32,
}

// exp: e^x = 2^k · e^r with k = round(x/ln 2) and r = x - k·ln 2 computed
// in two steps (Cody and Waite): ln2Hi has 16 significant bits, so k·ln2Hi
// is exact for |k| < 256 and x - k·ln2Hi is exact (Sterbenz). On |r| ≤
// ln(2)/2, e^r = 1 + r + r²·P(r) with P of degree 5 (relative error
// 2^-33). For -87 ≤ x ≤ 88, 2^k is a normal float32, built from k's bits.
const (
	log2e    = 1.44269504088896340735992468100189214
	ln2Hi    = 0.693145751953125   // 45426/65536
	ln2Lo    = 1.4286067653302e-06 // ln 2 - ln2Hi
	roundMag = 12582912            // 1.5·2^23: x + roundMag rounds x to an integer (|x| < 2^22)

	exp2 = 0.5
	exp3 = 0.16666666
	exp4 = 0.041666456
	exp5 = 0.008333569
	exp6 = 0.0013935934
	exp7 = 0.00019742693
)

// expF32Go sets d[i] = e^a[i] for i < len(d), with ar around it: the
// loop in Go, which expF32 runs where it has no vector loop (and for the
// ends and edge inputs where it has one). Each product is converted to
// float32 explicitly so that no platform fuses it into a multiply-add:
// the vector loop rounds it the same way.
func expF32Go(d, a []float32, ar around) {
	a = a[:len(d)]
	for i, x := range a {
		x *= ar.pre
		var y float32
		if !(x >= -87 && x <= 88) { // 2^k below is not a normal float32, or x is NaN
			y = expEdge(x)
		} else {
			t := float32(x*log2e) + roundMag
			k := int32(math.Float32bits(t)) - int32(math.Float32bits(roundMag))
			kf := t - roundMag
			r := x - float32(kf*ln2Hi)
			r -= float32(kf * ln2Lo)
			r2 := r * r
			// Estrin's scheme
			p := (exp2 + float32(exp3*r)) + float32(r2*((exp4+float32(exp5*r))+float32(r2*(exp6+float32(exp7*r)))))
			y = (1 + (r + float32(r2*p))) * math.Float32frombits(uint32(k+127)<<23)
		}
		y += ar.post
		if ar.recip {
			y = 1 / y
		}
		d[i] = y
	}
}

// expEdge is e^x for the x outside [-87, 88], among them those whose
// result overflows, is subnormal or underflows, and NaN: the exact path,
// which rounds such results once.
//
//go:noinline
func expEdge(x float32) float32 { return float32(math.Exp(float64(x))) }

// log: x = 2^e · m with m in [√2/2, √2), f = m - 1 (exact), and
// log(1+f) = 2·atanh(s) with s = f/(2+f), |s| ≤ 0.1716. Written as
// f - (hf - s·(hf + R)) with hf = f²/2 and R = 2·atanh(s)/s - 2 (an
// identity, as in Cody and Waite's and fdlibm's logarithms) so that the
// rounding error of s only touches the small correction term;
// R = z·(L1 + L2·z + L3·z²) with z = s² (absolute error 2^-29).
const (
	sqrtHalfBits = 0x3f3504f3 // float32 bits of √2/2

	logL1 = 0.6666678
	logL2 = 0.39976734
	logL3 = 0.29896012
)

// logF32 sets d[i] = ln a[i] for i < len(d), with ar around it.
func logF32(d, a []float32, ar around) {
	a = a[:len(d)]
	for i, x := range a {
		x *= ar.pre
		ix := math.Float32bits(x)
		var y float32
		if ix-0x00800000 >= 0x7f000000 { // not a positive normal number
			y = logEdge(x)
		} else {
			ix += 0x3f800000 - sqrtHalfBits // carries into the exponent when m ≥ √2
			e := float32(int32(ix>>23) - 127)
			f := math.Float32frombits(ix&0x007fffff+sqrtHalfBits) - 1
			s := f / (2 + f)
			z := s * s
			R := z * (logL1 + z*(logL2+z*logL3))
			hf := 0.5 * f * f
			y = e*ln2Hi - ((hf - (s*(hf+R) + e*ln2Lo)) - f)
		}
		y += ar.post
		if ar.recip {
			y = 1 / y
		}
		d[i] = y
	}
}

// logEdge is ln x for the x that are not positive normal numbers (zeros,
// subnormals, negative numbers, infinities and NaN): the exact path.
//
//go:noinline
func logEdge(x float32) float32 { return float32(math.Log(float64(x))) }

// erf and tanh are odd. On [0, 1/4) they are polynomials in |x| with a
// constant term of 0, so that they keep their relative precision down to
// the subnormals; erf's is erf(u) - u, and u is added back, because
// erf'(0) = 2/√π rounded to float32 would cost an ulp by itself (the
// ninth entry of erf's rows, 1 on the first segment and 0 elsewhere).
// From 1/4 up, each binade [2^e, 2^(e+1)) is cut into four segments by
// the top two bits of the significand, so a segment's index comes from
// the bits of |x| with integer instructions (segment); on each, the
// function is a polynomial in u = |x| - c, c the segment's centre, which
// is exact (Sterbenz). Each row of a table is {c, the coefficients from
// degree 0 up}, of degree 4 to 6 (zeros pad the rest). From erfOne and
// tanhOne on, the float32 result is ±1.
const (
	erfOne  = 3.919205904006958 // 0x407ad445, the least x with float32(erf(x)) = 1
	tanhOne = 9.010913848876953 // 0x41102cb4, the least x with float32(tanh(x)) = 1
)

var erfTab = [17][9]float32{
	{0.0, 0.0, 0.12837917, -5.0500097e-07, -0.3760945, -0.00061234593, 0.117899515, -0.018992431, 1},                 // [0, 0.25)
	{0.28125, 0.30918372, 1.0425615, -0.2931343, -0.2924759, 0.052393667, 0.0, 0.0, 0},                               // [0.25, 0.3125)
	{0.34375, 0.3731292, 1.0026217, -0.34461522, -0.25526252, 0.122910015, 0.0, 0.0, 0},                              // [0.3125, 0.375)
	{0.40625, 0.4343869, 0.9567082, -0.38864604, -0.21356007, 0.15652983, 0.0, 0.0, 0},                               // [0.375, 0.4375)
	{0.46875, 0.49261346, 0.90579313, -0.42452148, -0.16919364, 0.1119395, 0.0, 0.0, 0},                              // [0.4375, 0.5)
	{0.5625, 0.57367444, 0.82232136, -0.46252483, -0.10065877, 0.17499197, 0.0, 0.0, 0},                              // [0.5, 0.625)
	{0.6875, 0.66908467, 0.7033687, -0.4835765, -0.012822401, 0.16814798, -0.04054317, 0.0, 0},                       // [0.625, 0.75)
	{0.8125, 0.74946404, 0.5831132, -0.47379863, 0.06222406, 0.13747227, -0.054371253, 0.0, 0},                       // [0.75, 0.875)
	{0.9375, 0.8151024, 0.46854457, -0.43925512, 0.11836914, 0.08953981, -0.0719881, 0.0, 0},                         // [0.875, 1)
	{1.125, 0.8883882, 0.31827396, -0.358041, 0.16245314, 0.025081867, -0.06133782, 0.1369472, 0},                    // [1, 1.25)
	{1.375, 0.94817007, 0.17035978, -0.23423679, 0.1579377, -0.03184165, -0.0306439, 0.07906756, 0},                  // [1.25, 1.5)
	{1.625, 0.97844374, 0.08047226, -0.13077338, 0.114840634, -0.04911254, -0.0022361225, 0.0, 0},                    // [1.5, 1.75)
	{1.875, 0.99199003, 0.033545826, -0.0628847, 0.067442544, -0.043073382, 0.0113002565, 0.0, 0},                    // [1.75, 2)
	{2.25, 0.9985373, 0.0071423193, -0.016075378, 0.021725053, -0.0188717, 0.010614064, -0.005028594, 0},             // [2, 2.5)
	{2.75, 0.9998994, 0.0005862773, -0.001614813, 0.002759869, -0.0031539719, 0.0027979556, -0.002726924, 0},         // [2.5, 3)
	{3.25, 0.9999957, 2.9189026e-05, -9.8069366e-05, 0.00019568142, -0.00015099427, 0.00032461158, -0.0017015041, 0}, // [3, 3.5)
	{3.75, 0.9999999, 8.814324e-07, -2.7506128e-06, 8.83292e-06, -2.2562619e-05, 0.0, 0.0, 0},                        // [3.5, 4)
}

var tanhTab = [22][8]float32{
	{0.0, 0.0, 1.0, -1.0972677e-06, -0.3332702, -0.0011837659, 0.14308453, -0.036977492},                        // [0, 0.25)
	{0.28125, 0.2740616, 0.9248903, -0.25348622, -0.23885386, 0.15775143, 0.0, 0.0},                             // [0.25, 0.3125)
	{0.34375, 0.33082113, 0.8905574, -0.29468682, -0.19945852, 0.23399365, 0.0, 0.0},                            // [0.3125, 0.375)
	{0.40625, 0.38528398, 0.8515563, -0.32817346, -0.1575567, 0.25100377, 0.0, 0.0},                             // [0.375, 0.4375)
	{0.46875, 0.43718877, 0.80886596, -0.35354108, -0.11498558, 0.08226026, 0.0, 0.0},                           // [0.4375, 0.5)
	{0.5625, 0.50983, 0.74007344, -0.3773609, -0.054405816, 0.16593666, -0.02384721, 0.0},                       // [0.5, 0.625)
	{0.6875, 0.59637356, 0.6443386, -0.38427168, 0.014363554, 0.12079402, -0.05716782, 0.0},                     // [0.625, 0.75)
	{0.8125, 0.6709671, 0.5498032, -0.36895677, 0.064213395, 0.09445196, -0.0521534, 0.0},                       // [0.75, 0.875)
	{0.9375, 0.7340715, 0.461139, -0.33845508, 0.09480615, 0.029531622, -0.06097863, 0.0},                       // [0.875, 1)
	{1.125, 0.8093011, 0.34503177, -0.27924383, 0.11097619, 0.004829112, -0.032067906, -0.04755764},             // [1, 1.25)
	{1.375, 0.8798267, 0.22590499, -0.19877124, 0.09956727, -0.020285023, -0.009272191, 0.0},                    // [1.25, 1.5)
	{1.625, 0.92534626, 0.14373437, -0.13301986, 0.07516174, -0.024141852, 0.0015409216, 0.0},                   // [1.5, 1.75)
	{1.875, 0.95404524, 0.08979764, -0.085658796, 0.05180296, -0.021635514, 0.0045237797, 0.0},                  // [1.75, 2)
	{2.25, 0.9780261, 0.043464918, -0.042503305, 0.027087687, -0.0126005355, 0.0039777616, 0.002239587},         // [2, 2.5)
	{2.75, 0.99185973, 0.016214287, -0.01608501, 0.010546516, -0.0049850056, 0.0019105149, -0.0017646971},       // [2.5, 3)
	{3.25, 0.99699765, 0.005995715, -0.0059831543, 0.0039611193, -0.0017249988, 0.0007681761, -0.0027105426},    // [3, 3.5)
	{3.75, 0.99889445, 0.0022098923, -0.0022085751, 0.0014683224, -0.000718882, 0.00029231838, 0.0},             // [3.5, 4)
	{4.5, 0.99975324, 0.00049351744, -0.00049522583, 0.0003286907, -0.00014503051, 6.715491e-05, -7.239353e-05}, // [4, 5)
	{5.5, 0.9999666, 6.6804576e-05, -6.747865e-05, 4.450314e-05, -2.031358e-05, 9.232466e-06, 0.0},              // [5, 6)
	{6.5, 0.99999547, 9.041277e-06, -8.731208e-06, 6.0238544e-06, -4.3556547e-06, 1.2488418e-06, 0.0},           // [6, 7)
	{7.5, 0.9999994, 1.2236084e-06, -1.7146165e-06, 8.36877e-07, 1.5004231e-06, 0.0, 0.0},                       // [7, 8)
	{9.0, 0.99999994, 6.091977e-08, 1.6865972e-07, 4.495333e-08, -2.4812144e-07, 0.0, 0.0},                      // [8, 10)
}

// segment is the row of a table of n segments for |x| with bits ab: 0
// below 1/4, then four per binade, the last one for everything above
// (NaN and the infinities included). It clamps without branches, which
// random data would mispredict.
func segment(ab uint32, n int) int32 {
	j := int32(ab-0x3e800000)>>21 + 1
	j &^= j >> 31 // 0 below 1/4
	over := j - int32(n-1)
	return j - over&^(over>>31)
}

// erfF32Go sets d[i] = erf(a[i]) for i < len(d), with ar around it: the
// loop in Go, which erfF32 runs where it has no vector loop (and for the
// ends). Products are converted to float32 so that none is fused.
func erfF32Go(d, a []float32, ar around) {
	a = a[:len(d)]
	for i, x := range a {
		x *= ar.pre
		bx := math.Float32bits(x)
		sign := math.Float32frombits(bx&(1<<31) | 0x3f800000) // ±1
		ab := bx &^ (1 << 31)
		ax := math.Float32frombits(ab)
		c := &erfTab[segment(ab, len(erfTab))]
		u := ax - c[0]
		u2 := u * u
		// Estrin's scheme: a shorter dependency chain than Horner's.
		hi := (c[3] + float32(c[4]*u)) + float32(u2*((c[5]+float32(c[6]*u))+float32(u2*c[7])))
		p := c[1] + (float32(c[8]*u) + (float32(c[2]*u) + float32(u2*hi))) // c[8]·u: erf(u) - u on the first segment
		if ax >= erfOne {
			p = 1
		}
		y := float32(p*sign) + ar.post
		if ar.recip {
			y = 1 / y
		}
		d[i] = y
	}
}

// tanhF32Go sets d[i] = tanh(a[i]) for i < len(d), with ar around it:
// the loop in Go, which tanhF32 runs where it has no vector loop (and for
// the ends). Products are converted to float32 so that none is fused.
func tanhF32Go(d, a []float32, ar around) {
	a = a[:len(d)]
	for i, x := range a {
		x *= ar.pre
		bx := math.Float32bits(x)
		sign := math.Float32frombits(bx&(1<<31) | 0x3f800000)
		ab := bx &^ (1 << 31)
		ax := math.Float32frombits(ab)
		c := &tanhTab[segment(ab, len(tanhTab))]
		u := ax - c[0]
		u2 := u * u
		hi := (c[3] + float32(c[4]*u)) + float32(u2*((c[5]+float32(c[6]*u))+float32(u2*c[7])))
		p := c[1] + (float32(c[2]*u) + float32(u2*hi))
		if ax >= tanhOne {
			p = 1
		}
		y := float32(p*sign) + ar.post
		if ar.recip {
			y = 1 / y
		}
		d[i] = y
	}
}
