package tensor

import (
	"reflect"
	"runtime"

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
// algebraic simplification, common subexpressions, constant folding
// (evaluated with the eager kernels) and dead code.
func optimize(g *ir.Graph) {
	ir.Optimize(g, func(n *ir.Node, args []any) (any, error) {
		vals := make([]ir.Value, len(args))
		for i, a := range args {
			vals[i] = a
		}
		var out *Tensor
		err := Try(func() { out = apply(n.Op, n.Attrs, vals...) })
		return out, err
	})
}
