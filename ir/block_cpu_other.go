//go:build !amd64 || purego

package ir

// vecF32 reports false: there is no vector loop (floatLoop computes).
func vecF32(p Prim, d, a, b []float32, bcast int) bool { return false }

// isArith reports whether p is an add, subtract, multiply or divide.
func isArith(p Prim) bool { return p == PAdd || p == PSub || p == PMul || p == PDiv }
