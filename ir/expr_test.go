package ir

import (
	"math"
	"strings"
	"testing"
)

// C has no literals for infinities and NaN: they print as bit patterns.
func TestCLiteralSpecialValues(t *testing.T) {
	for _, c := range []struct {
		v    float64
		k    Kind
		want string
	}{
		{math.Inf(1), F32, "__uint_as_float(0x7f800000u)"},
		{math.Inf(-1), F32, "__uint_as_float(0xff800000u)"},
		{math.Inf(-1), F64, "__longlong_as_double(0xfff0000000000000LL)"},
		{1.5, F32, "1.5f"},
		{2, F64, "2.0"},
	} {
		if got := cLiteral(c.v, c.k); got != c.want {
			t.Errorf("cLiteral(%v, %v) = %s, want %s", c.v, c.k, got, c.want)
		}
	}
	if got := cLiteral(math.NaN(), F32); !strings.HasPrefix(got, "__uint_as_float(0x7fc") {
		t.Errorf("NaN prints as %s", got)
	}
}

// A cast through a 16-bit type rounds as a store and load would, on the
// CPU, and prints as the same conversions in C.
func TestCastViaRounds(t *testing.T) {
	for _, c := range []struct {
		via  DType
		load func(uint16) float32
		st   func(float32) uint16
		c    string
	}{
		{Float16, F16ToF32, F32ToF16, "gc_ld_half(gc_st_half((float)("},
		{BFloat16, BF16ToF32, F32ToBF16, "gc_ld_bf16(gc_st_bf16((float)("},
	} {
		for _, k := range []Kind{F32, F64} {
			e := CastVia(Arg(0), c.via, k)
			b, err := CompileBlock(e, []Kind{k}, k)
			if err != nil {
				t.Fatal(err)
			}
			in := []float64{1.0009765625, 3.14159265358979, -65519.9, 1e-8, 70000, math.Inf(-1)}
			x := NewVec(k, len(in))
			for i, v := range in {
				if k == F32 {
					x.F32[i] = float32(v)
				} else {
					x.F64[i] = v
				}
			}
			f := b.NewFrame(len(in), nil)
			f.SetArg(0, x)
			got := f.Run(len(in), nil)
			for i, v := range in {
				want := float64(c.load(c.st(float32(v))))
				g := float64(0)
				if k == F32 {
					g = float64(got.F32[i])
				} else {
					g = got.F64[i]
				}
				if math.Float64bits(g) != math.Float64bits(want) {
					t.Errorf("%v via %v: %v became %v, want %v", k, c.via, v, g, want)
				}
			}
			src, err := e.C(func(int) string { return "a" }, nil, []Kind{k}, k)
			if err != nil || !strings.Contains(src, c.c) || !strings.Contains(e.String(), "via_"+c.via.String()) {
				t.Errorf("%v via %v: C %q, string %q, err %v", k, c.via, src, e, err)
			}
		}
	}
}
