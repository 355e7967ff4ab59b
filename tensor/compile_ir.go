package tensor

import (
	"reflect"
	"runtime"

	"gocompile/array"
	"gocompile/internal/logs"
	"gocompile/ir"
)

func runtimeFuncName(fn reflect.Value) string {
	if f := runtime.FuncForPC(fn.Pointer()); f != nil {
		return f.Name()
	}
	return ""
}

// graphKey is the structural key segments are cached by.
func graphKey(g *ir.Graph) string { return g.Key() }

func graphString(g *ir.Graph) string { return g.String() }

// optimize runs the graph passes: decomposition of composite ops,
// algebraic simplification, casts moved toward what they convert, common
// subexpressions, constant folding and dead code, then casts split for
// their readers. Constants are bound by reference (a weight updated in place
// is seen by later calls), so only views of constants fold: they alias
// the constant's storage. A pass that fails leaves a valid graph; the
// failure is logged.
func optimize(g *ir.Graph) {
	_, err := ir.Optimize(g, func(n *ir.Node, args []any) (any, error) {
		if n.Op.Kind != ir.View {
			return nil, nil // decline: a new tensor would break by-reference binding
		}
		vals := make([]ir.Value, len(args))
		for i, a := range args {
			vals[i] = a // constants' arrays, and scalars
		}
		var out *array.Array
		err := Try(func() { out = array.Apply(n.Op, n.Attrs, vals...) })
		return out, err
	})
	if err != nil {
		logs.Warn("gocompile: a graph pass failed; compiling the graph as it stands", "err", err)
	}
	// Then each reader of a cheap cast gets its own copy, fused into its
	// kernel. This must come before in-place writes are decided
	// (markInPlace), which must see every reader of a storage's old
	// contents: a copy may run later than the cast it copies.
	ir.SplitCasts(g)
}
