package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Name is the node's name in printed graphs: x<Index> for an input, c<ID>
// for a constant and v<ID> for a call.
func (n *Node) Name() string {
	if n == nil {
		return "nil"
	}
	switch n.Kind {
	case InputNode:
		return "x" + strconv.Itoa(n.Index)
	case ConstNode:
		return "c" + strconv.Itoa(n.ID)
	}
	return "v" + strconv.Itoa(n.ID)
}

// TypeString is the node's metadata as printed: float32[2, 3], with
// @cuda:0 appended for a node that is not on the CPU.
func (n *Node) TypeString() string {
	if n.Sym == nil {
		return typeString(n.Shape, n.DType, n.Device)
	}
	dims := make([]string, len(n.Shape))
	for d, size := range n.Shape {
		switch k := n.Sym[d]; {
		case k > 0:
			dims[d] = fmt.Sprintf("s%d", k-1)
		case k == SymDerived:
			dims[d] = "?"
		default:
			dims[d] = fmt.Sprint(size)
		}
	}
	s := n.DType.String() + "[" + strings.Join(dims, ", ") + "]"
	if n.Device != CPU {
		s += "@" + n.Device.String()
	}
	return s
}

func typeString(shape []int, dt DType, dev Device) string {
	s := dt.String() + FormatShape(shape)
	if dev != CPU {
		s += "@" + dev.String()
	}
	return s
}

// String prints the graph as Go-like code, one line per constant and call,
// each followed by a comment with its metadata and location:
//
//	func graph(x0 float32[32, 1024], x1 float32[1024, 1024]) (float32[32, 1024]) {
//	    c2 := const float32[1024]              // model.go:12
//	    v3 := x0.MatMul(x1)  // float32[32, 1024]  model.go:20
//	    return v3
//	}
func (g *Graph) String() string {
	var b strings.Builder
	b.WriteString("func graph(")
	for i, in := range g.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(in.Name() + " " + in.TypeString())
	}
	b.WriteString(") (")
	for i, out := range g.Outputs {
		if i > 0 {
			b.WriteString(", ")
		}
		if out == nil {
			b.WriteString("nil")
			continue
		}
		b.WriteString(out.TypeString())
	}
	b.WriteString(") {\n")

	type line struct{ code, typ, loc string }
	var lines []line
	codeW, typW := 0, 0
	for _, n := range g.Nodes {
		var l line
		switch n.Kind {
		case InputNode:
			continue
		case ConstNode:
			l = line{code: n.Name() + " := const " + n.TypeString(), loc: n.Loc}
		default:
			l = line{code: n.Name() + " := " + callExpr(n), typ: n.TypeString(), loc: n.Loc}
			typW = max(typW, len(l.typ))
		}
		codeW = max(codeW, len(l.code))
		lines = append(lines, l)
	}
	for _, l := range lines {
		b.WriteString("    ")
		if l.typ == "" && l.loc == "" {
			b.WriteString(l.code + "\n")
			continue
		}
		var s string
		if l.typ == "" { // a constant: its type is in the code
			s = fmt.Sprintf("%-*s  // %s", codeW, l.code, l.loc)
		} else {
			s = fmt.Sprintf("%-*s  // %-*s  %s", codeW, l.code, typW, l.typ, l.loc)
		}
		b.WriteString(strings.TrimRight(s, " ") + "\n")
	}
	b.WriteString("    return")
	for i, out := range g.Outputs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + out.Name())
	}
	b.WriteString("\n}\n")
	return b.String()
}

// callExpr prints a call node as a method call on its first operand (or as
// a function call when the first operand is not a tensor), followed by its
// other operands and its relevant attributes.
func callExpr(n *Node) string {
	if n.Op == nil {
		return "<nil op>(" + strings.Join(argStrings(n.Args), ", ") + ")"
	}
	args := argStrings(n.Args)
	params := append(args, attrStrings(n.Op, n.Attrs)...)
	if len(n.Args) > 0 {
		if recv, ok := n.Args[0].(*Node); ok && recv != nil {
			return recv.Name() + "." + n.Op.Title + "(" + strings.Join(params[1:], ", ") + ")"
		}
	}
	return n.Op.Title + "(" + strings.Join(params, ", ") + ")"
}

func argStrings(args []Value) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = argString(a)
	}
	return out
}

func argString(a Value) string {
	switch a := a.(type) {
	case nil:
		return "nil"
	case *Node:
		return a.Name()
	case Scalar:
		return scalarLiteral(a)
	}
	return fmt.Sprintf("<%T>", a)
}

// scalarLiteral prints a scalar as a literal of its category: true, 2, 2.0,
// 0.5, inf, nan.
func scalarLiteral(s Scalar) string {
	v := s.Value
	switch s.DType {
	case Bool:
		return strconv.FormatBool(v != 0)
	case Int32, Int64:
		if v == math.Trunc(v) && math.Abs(v) < 1e18 {
			return strconv.FormatInt(int64(v), 10)
		}
	}
	return floatLiteral(v, s.DType.IsFloat())
}

// floatLiteral prints v; with forceDot an integral value gets ".0" so that
// a float scalar reads differently from an int one.
func floatLiteral(v float64, forceDot bool) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if forceDot && !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// paramLiteral prints a scalar parameter (Attrs.Scalars) typed as ScalarOf
// types it.
func paramLiteral(v float64) string { return scalarLiteral(ScalarOf(v)) }

func intsString(s []int) string { return FormatShape(s) }

// attrStrings prints the attributes that matter for op, as positional
// literals or key=value pairs. Ops the printer does not know show every
// non-zero field.
func attrStrings(op *Op, a Attrs) []string {
	var out []string
	kv := func(k, v string) { out = append(out, k+"="+v) }
	scalars := func() {
		for _, s := range a.Scalars {
			out = append(out, paramLiteral(s))
		}
	}
	switch op.Kind {
	case Pointwise:
		if op.Rule == CastTo {
			out = append(out, a.DType.String())
		}
		scalars()
		return out
	case Reduction:
		if len(a.Dims) > 0 {
			kv("dims", intsString(a.Dims))
		}
		if a.KeepDim {
			kv("keepdim", "true")
		}
		return out
	}
	switch op.Name {
	case "reshape", "expand":
		kv("shape", intsString(a.Dims))
	case "permute":
		kv("dims", intsString(a.Dims))
	case "transpose":
		out = append(out, strconv.Itoa(a.Dim), strconv.Itoa(a.Dim2))
	case "squeeze":
		if len(a.Dims) > 0 {
			kv("dims", intsString(a.Dims))
		}
	case "unsqueeze", "cat", "stack", "gather", "index_select", "softmax", "log_softmax":
		kv("dim", strconv.Itoa(a.Dim))
	case "slice":
		kv("dim", strconv.Itoa(a.Dim))
		kv("start", strconv.Itoa(a.Start))
		kv("stop", strconv.Itoa(a.Stop))
		if a.Step != 1 {
			kv("step", strconv.Itoa(a.Step))
		}
	case "matmul", "contiguous", "embedding", "linear":
	case "var":
		if len(a.Dims) > 0 {
			kv("dims", intsString(a.Dims))
		}
		if len(a.Scalars) > 0 {
			kv("correction", paramLiteral(a.Scalars[0]))
		}
		if a.KeepDim {
			kv("keepdim", "true")
		}
	case "layer_norm", "rms_norm":
		kv("shape", intsString(a.Dims))
		if len(a.Scalars) > 0 {
			kv("eps", paramLiteral(a.Scalars[0]))
		}
	default:
		return genericAttrs(a)
	}
	return out
}

// genericAttrs prints every non-zero field of a.
func genericAttrs(a Attrs) []string {
	var out []string
	if len(a.Dims) > 0 {
		out = append(out, "dims="+intsString(a.Dims))
	}
	for _, f := range []struct {
		k string
		v int
	}{{"dim", a.Dim}, {"dim2", a.Dim2}, {"start", a.Start}, {"stop", a.Stop}, {"step", a.Step}} {
		if f.v != 0 {
			out = append(out, f.k+"="+strconv.Itoa(f.v))
		}
	}
	if a.KeepDim {
		out = append(out, "keepdim=true")
	}
	if len(a.Scalars) > 0 {
		s := make([]string, len(a.Scalars))
		for i, v := range a.Scalars {
			s[i] = paramLiteral(v)
		}
		out = append(out, "scalars=["+strings.Join(s, ", ")+"]")
	}
	if a.DType != Invalid {
		out = append(out, "dtype="+a.DType.String())
	}
	return out
}

// DOT returns the graph in Graphviz's language: a box per node labelled
// with its name, op and metadata, an edge from each tensor argument to its
// user (labelled with the argument's position), inputs as blue ellipses,
// constants as grey boxes and outputs with a double border.
func (g *Graph) DOT() string {
	var b strings.Builder
	b.WriteString("digraph G {\n")
	b.WriteString("  rankdir=TB;\n")
	b.WriteString("  node [shape=box, fontname=\"monospace\"];\n")
	outputs := map[*Node][]int{}
	for i, o := range g.Outputs {
		outputs[o] = append(outputs[o], i)
	}
	id := func(n *Node) string { return "n" + strconv.Itoa(n.ID) }
	for _, n := range g.Nodes {
		var label string
		var style []string
		switch n.Kind {
		case InputNode:
			label = n.Name() + "\ninput " + strconv.Itoa(n.Index)
			style = append(style, "shape=ellipse", "style=filled", "fillcolor=lightblue")
		case ConstNode:
			label = n.Name() + "\nconst"
			style = append(style, "style=filled", "fillcolor=lightgrey")
		default:
			label = n.Name() + " = " + callExpr(n)
		}
		label += "\n" + n.TypeString()
		if outs, ok := outputs[n]; ok {
			parts := make([]string, len(outs))
			for i, o := range outs {
				parts[i] = strconv.Itoa(o)
			}
			label += "\noutput " + strings.Join(parts, ", ")
			style = append(style, "peripheries=2", "color=red")
		}
		attrs := append([]string{"label=" + dotQuote(label)}, style...)
		fmt.Fprintf(&b, "  %s [%s];\n", id(n), strings.Join(attrs, ", "))
	}
	for _, n := range g.Nodes {
		for i, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil {
				fmt.Fprintf(&b, "  %s -> %s [label=\"%d\"];\n", id(an), id(n), i)
			}
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote quotes s as a DOT string; newlines become \n line breaks.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
