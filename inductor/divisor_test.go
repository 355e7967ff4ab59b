package inductor

import (
	"math/rand/v2"
	"testing"
)

// Divisor.Div equals integer division for every divisor shape (powers of
// two, their neighbours, 1, the largest) and dividends up to 2^31-1.
func TestDivisor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ds := []uint32{1, 2, 3, 5, 7, 10, 127, 128, 129, 1000, 4097, 65535, 65536, 999_983, 1<<30 - 1, 1 << 30, 1<<31 - 1, 1 << 31}
	for range 200 {
		ds = append(ds, r.Uint32N(1<<31)+1, r.Uint32N(1<<12)+1)
	}
	for _, d := range ds {
		v := NewDivisor(d)
		ns := []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, 1<<31 - 1, 1<<31 - 2}
		for range 2000 {
			ns = append(ns, r.Uint32N(1<<31), uint32(r.Uint64N(min(4*uint64(d), 1<<31))))
		}
		for _, n := range ns {
			if n >= 1<<31 {
				continue
			}
			if got := v.Div(n); got != n/d {
				t.Fatalf("%d / %d = %d, want %d (magic %d shift %d)", n, d, got, n/d, v.Magic, v.Shift)
			}
		}
	}
}
