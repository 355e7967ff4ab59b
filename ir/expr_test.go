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
