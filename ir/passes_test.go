package ir

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustValidate(t *testing.T, g *Graph, when string) {
	t.Helper()
	if err := g.Validate(); err != nil {
		t.Fatalf("%s: %v\n%s", when, err, g)
	}
}

func countOp(g *Graph, op *Op) int {
	k := 0
	for _, n := range g.Nodes {
		if n.Kind == CallNode && n.Op == op {
			k++
		}
	}
	return k
}

func intS(v float64) Scalar   { return Scalar{Value: v, DType: Int64} }
func floatS(v float64) Scalar { return Scalar{Value: v, DType: Float64} }

func TestDCE(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(4), Float32, CPU, "")
	unused := g.Input(shp(3), Float32, CPU, "")
	c := g.Const(1, shp(4), Float32, CPU, "")
	deadC := g.Const(2, shp(4), Float32, CPU, "")
	a := mustCall(t, g, OpAdd, Attrs{}, "", x, c)
	dead1 := mustCall(t, g, OpExp, Attrs{}, "", a)
	mustCall(t, g, OpMul, Attrs{}, "", dead1, deadC)
	mustCall(t, g, OpNeg, Attrs{}, "", unused)
	out := mustCall(t, g, OpNeg, Attrs{}, "", a)
	g.Outputs = []*Node{out, a}
	if got := DCE(g); got != 4 {
		t.Errorf("DCE removed %d nodes, want 4", got)
	}
	mustValidate(t, g, "after DCE")
	want := []*Node{x, unused, c, a, out}
	if len(g.Nodes) != len(want) {
		t.Fatalf("nodes %v", g)
	}
	for i, n := range want {
		if g.Nodes[i] != n {
			t.Errorf("node %d is %s, want %s", i, g.Nodes[i].Name(), n.Name())
		}
	}
	if len(g.Inputs) != 2 || g.Outputs[0] != out || g.Outputs[1] != a {
		t.Error("inputs or outputs changed")
	}
	if DCE(g) != 0 {
		t.Error("DCE is not idempotent")
	}
}

func TestCSE(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  func(t *testing.T, g *Graph, x, y *Node) (a, b *Node)
		merged bool
	}{
		{"same op and args", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpAdd, Attrs{}, "l1", x, y), mustCall(t, g, OpAdd, Attrs{}, "l2", x, y)
		}, true},
		{"equal scalars", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpMul, Attrs{}, "", x, intS(2)), mustCall(t, g, OpMul, Attrs{}, "", x, intS(2))
		}, true},
		{"nil and empty dims", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpSum, Attrs{}, "", x), mustCall(t, g, OpSum, Attrs{Dims: []int{}}, "", x)
		}, true},
		{"same attrs", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			a := Attrs{Dims: []int{1}, KeepDim: true}
			return mustCall(t, g, OpSum, a, "", x), mustCall(t, g, OpSum, Attrs{Dims: []int{1}, KeepDim: true}, "", x)
		}, true},
		{"different dims", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpSum, Attrs{Dims: []int{0}}, "", x), mustCall(t, g, OpSum, Attrs{Dims: []int{1}}, "", x)
		}, false},
		{"different keepdim", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpSum, Attrs{Dims: []int{1}}, "", x), mustCall(t, g, OpSum, Attrs{Dims: []int{1}, KeepDim: true}, "", x)
		}, false},
		{"different param scalars", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpClamp, Attrs{Scalars: []float64{0, 6}}, "", x), mustCall(t, g, OpClamp, Attrs{Scalars: []float64{0, 5}}, "", x)
		}, false},
		{"different cast targets", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpCast, Attrs{DType: Float16}, "", x), mustCall(t, g, OpCast, Attrs{DType: BFloat16}, "", x)
		}, false},
		{"different scalar values", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpMul, Attrs{}, "", x, intS(2)), mustCall(t, g, OpMul, Attrs{}, "", x, intS(3))
		}, false},
		{"different scalar categories", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpMul, Attrs{}, "", x, intS(2)), mustCall(t, g, OpMul, Attrs{}, "", x, floatS(2))
		}, false},
		{"swapped operands", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpAdd, Attrs{}, "", x, y), mustCall(t, g, OpAdd, Attrs{}, "", y, x)
		}, false},
		{"different ops", func(t *testing.T, g *Graph, x, y *Node) (*Node, *Node) {
			return mustCall(t, g, OpAdd, Attrs{}, "", x, y), mustCall(t, g, OpMul, Attrs{}, "", x, y)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Graph{}
			x := g.Input(shp(4, 8), Float32, CPU, "")
			y := g.Input(shp(4, 8), Float32, CPU, "")
			a, b := tc.build(t, g, x, y)
			ua := mustCall(t, g, OpNeg, Attrs{}, "", a)
			ub := mustCall(t, g, OpNeg, Attrs{}, "", b)
			g.Outputs = []*Node{ua, ub, b}
			n := CSE(g)
			mustValidate(t, g, "after CSE")
			if !tc.merged {
				if n != 0 || g.Outputs[2] != b {
					t.Errorf("CSE merged %d nodes, want none:\n%s", n, g)
				}
				return
			}
			// b merges into a, and then Neg(b) into Neg(a)
			if n != 2 || g.Outputs[0] != ua || g.Outputs[1] != ua || g.Outputs[2] != a {
				t.Errorf("CSE merged %d nodes, want 2; outputs %v:\n%s", n, g.Outputs, g)
			}
			if a.Loc != "" && a.Loc != "l1" {
				t.Errorf("kept loc %q", a.Loc)
			}
		})
	}
}

func TestSimplify(t *testing.T) {
	type built struct {
		out  *Node // the node under test, made an output
		want *Node // what the output should become; nil: unchanged
	}
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, g *Graph) built
	}{
		{"x*1", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", x, intS(1)), x}
		}},
		{"1*x", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", intS(1), x), x}
		}},
		{"x*1.0 float16", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float16, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", x, floatS(1)), x}
		}},
		{"float x+0 kept: -0 + 0 is +0", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", x, intS(0)), nil}
		}},
		{"int x+0", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Int64, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", x, intS(0)), x}
		}},
		{"0+x int32", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Int32, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", intS(0), x), x}
		}},
		{"x-0", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 3), Float64, CPU, "")
			return built{mustCall(t, g, OpSub, Attrs{}, "", x, floatS(0)), x}
		}},
		{"x/1", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpDiv, Attrs{}, "", x, intS(1)), x}
		}},
		{"rank-0 x*1", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(), Float32, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", x, intS(1)), x}
		}},
		{"int x*1.0 promotes", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Int64, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", x, floatS(1)), nil}
		}},
		{"int x/1 promotes", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Int32, CPU, "")
			return built{mustCall(t, g, OpDiv, Attrs{}, "", x, intS(1)), nil}
		}},
		{"bool x+0 promotes", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Bool, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", x, intS(0)), nil}
		}},
		{"a view of a write reads the source", func(t *testing.T, g *Graph) built {
			return readBack(t, g, Float32, Attrs{Dims: []int{4, 3, 3, 1}}, Attrs{Dims: []int{4, 3, 3, 1}}, true)
		}},
		{"a transposed view of a transposed write reads the source", func(t *testing.T, g *Graph) built {
			return readBack(t, g, Float32, Attrs{Dims: []int{4, 3, 1, 4}}, Attrs{Dims: []int{4, 3, 1, 4}}, true)
		}},
		{"a view elsewhere in the storage kept", func(t *testing.T, g *Graph) built {
			return readBack(t, g, Float32, Attrs{Dims: []int{2, 3, 3, 1}}, Attrs{Dims: []int{2, 3, 3, 1}, Start: 6}, false)
		}},
		{"a view of an overlapping write kept", func(t *testing.T, g *Graph) built {
			return readBack(t, g, Float32, Attrs{Dims: []int{4, 3, 0, 1}}, Attrs{Dims: []int{4, 3, 0, 1}}, false)
		}},
		{"a view of a converting write kept", func(t *testing.T, g *Graph) built {
			return readBack(t, g, Float64, Attrs{Dims: []int{4, 3, 3, 1}}, Attrs{Dims: []int{4, 3, 3, 1}}, false)
		}},
		{"x*2 kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpMul, Attrs{}, "", x, intS(2)), nil}
		}},
		{"x+1 kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", x, intS(1)), nil}
		}},
		{"0-x kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			return built{mustCall(t, g, OpSub, Attrs{}, "", intS(0), x), nil}
		}},
		{"x+zeros broadcast kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			z := g.Const(0, shp(2, 3), Float32, CPU, "")
			return built{mustCall(t, g, OpAdd, Attrs{}, "", x, z), nil}
		}},
		{"double transpose", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 3, 4), Float32, CPU, "")
			a := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 2}, "", x)
			return built{mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 2}, "", a), x}
		}},
		{"double transpose swapped negative dims", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(4, 4), Float32, CPU, "")
			a := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", x)
			return built{mustCall(t, g, OpTranspose, Attrs{Dim: -1, Dim2: -2}, "", a), x}
		}},
		{"transposes of different dims kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 3, 3), Float32, CPU, "")
			a := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", x)
			return built{mustCall(t, g, OpTranspose, Attrs{Dim: 1, Dim2: 2}, "", a), nil}
		}},
		{"square transpose kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(4, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", x), nil}
		}},
		{"permute then inverse", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 3, 4), Float32, CPU, "")
			a := mustCall(t, g, OpPermute, Attrs{Dims: []int{1, 2, 0}}, "", x)
			return built{mustCall(t, g, OpPermute, Attrs{Dims: []int{2, 0, 1}}, "", a), x}
		}},
		{"permute twice kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 3, 3), Float32, CPU, "")
			a := mustCall(t, g, OpPermute, Attrs{Dims: []int{1, 2, 0}}, "", x)
			return built{mustCall(t, g, OpPermute, Attrs{Dims: []int{1, 2, 0}}, "", a), nil}
		}},
		{"permute, transpose, permute", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 3, 4), Float32, CPU, "")
			a := mustCall(t, g, OpPermute, Attrs{Dims: []int{2, 0, 1}}, "", x)             // [4, 2, 3]
			b := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 2}, "", a)                // [3, 2, 4]
			return built{mustCall(t, g, OpPermute, Attrs{Dims: []int{1, 0, 2}}, "", b), x} // [2, 3, 4]
		}},
		{"reshape to same shape", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpReshape, Attrs{Dims: []int{-1, 4}}, "", x), x}
		}},
		{"reshape and back", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 4), Float32, CPU, "")
			a := mustCall(t, g, OpReshape, Attrs{Dims: []int{8}}, "", x)
			return built{mustCall(t, g, OpReshape, Attrs{Dims: []int{2, 4}}, "", a), x}
		}},
		{"reshape to other shape kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(2, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpReshape, Attrs{Dims: []int{4, 2}}, "", x), nil}
		}},
		{"cast to same dtype", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float16, CPU, "")
			return built{mustCall(t, g, OpCast, Attrs{DType: Float16}, "", x), x}
		}},
		{"cast to other dtype kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float16, CPU, "")
			return built{mustCall(t, g, OpCast, Attrs{DType: Float32}, "", x), nil}
		}},
		{"cast round trip kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			a := mustCall(t, g, OpCast, Attrs{DType: Float16}, "", x)
			return built{mustCall(t, g, OpCast, Attrs{DType: Float32}, "", a), nil}
		}},
		{"unsqueeze then squeeze", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 4), Float32, CPU, "")
			a := mustCall(t, g, OpUnsqueeze, Attrs{Dim: 1}, "", x)
			return built{mustCall(t, g, OpSqueeze, Attrs{Dims: []int{-2}}, "", a), x}
		}},
		{"squeeze then unsqueeze", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 1, 4), Float32, CPU, "")
			a := mustCall(t, g, OpSqueeze, Attrs{Dims: []int{1}}, "", x)
			return built{mustCall(t, g, OpUnsqueeze, Attrs{Dim: 1}, "", a), x}
		}},
		{"unsqueeze then squeeze elsewhere kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 1, 4), Float32, CPU, "")
			a := mustCall(t, g, OpUnsqueeze, Attrs{Dim: 0}, "", x)
			return built{mustCall(t, g, OpSqueeze, Attrs{Dims: []int{2}}, "", a), nil} // [1, 3, 4]
		}},
		{"squeeze of a non-1 dim", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpSqueeze, Attrs{Dims: []int{0}}, "", x), x}
		}},
		{"expand to same shape", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpExpand, Attrs{Dims: []int{-1, 4}}, "", x), x}
		}},
		{"expand that broadcasts kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(1, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpExpand, Attrs{Dims: []int{3, 4}}, "", x), nil}
		}},
		{"full slice", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpSlice, Attrs{Dim: 1, Start: 0, Stop: 100, Step: 1}, "", x), x}
		}},
		{"strided slice kept", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3, 4), Float32, CPU, "")
			return built{mustCall(t, g, OpSlice, Attrs{Dim: 1, Start: 0, Stop: 4, Step: 2}, "", x), nil}
		}},
		{"nested identities", func(t *testing.T, g *Graph) built {
			x := g.Input(shp(3), Float32, CPU, "")
			a := mustCall(t, g, OpSub, Attrs{}, "", x, intS(0))
			b := mustCall(t, g, OpMul, Attrs{}, "", a, floatS(1))
			return built{mustCall(t, g, OpCast, Attrs{DType: Float32}, "", b), x}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Graph{}
			b := tc.build(t, g)
			user := mustCall(t, g, OpNeg, Attrs{}, "", b.out)
			g.Outputs = []*Node{b.out, user}
			before := g.Outputs[0].TypeString()
			n := Simplify(g)
			mustValidate(t, g, "after Simplify")
			want := b.want
			if want == nil {
				want = b.out
				if n != 0 {
					t.Errorf("Simplify made %d changes, want none:\n%s", n, g)
				}
			} else if n == 0 {
				t.Errorf("Simplify changed nothing")
			}
			if g.Outputs[0] != want {
				t.Errorf("output is %s, want %s:\n%s", g.Outputs[0].Name(), want.Name(), g)
			}
			if user.Args[0] != want {
				t.Errorf("user reads %s, want %s", user.Args[0].(*Node).Name(), want.Name())
			}
			if got := g.Outputs[0].TypeString(); got != before {
				t.Errorf("output metadata changed: %s -> %s", before, got)
			}
			// When the output became an input, every node of the simplified
			// chain is dead (the user is a Neg, which no case simplifies).
			DCE(g)
			if b.want != nil && b.want.Kind == InputNode && countOp(g, b.out.Op) != 0 {
				t.Errorf("replaced nodes survive DCE:\n%s", g)
			}
		})
	}
}

// A reshape of a reshape reads the inner operand, so the inner one dies.
// readBack builds AsStrided(AsStridedScatter(storage, src, write), read)
// over a float32 storage of 12 elements, src of type dt and the write's
// shape, and wants src back where same is set.
func readBack(t *testing.T, g *Graph, dt DType, write, read Attrs, same bool) struct{ out, want *Node } {
	r := len(write.Dims) / 2
	storage := g.Input(shp(12), Float32, CPU, "")
	src := g.Input(write.Dims[:r], dt, CPU, "")
	w := mustCall(t, g, OpAsStridedScatter, write, "", storage, src)
	out := mustCall(t, g, OpAsStrided, read, "", w)
	if same {
		return struct{ out, want *Node }{out, src}
	}
	return struct{ out, want *Node }{out, nil}
}

func TestSimplifyReshapeChain(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(2, 3, 4), Float32, CPU, "")
	a := mustCall(t, g, OpReshape, Attrs{Dims: []int{6, 4}}, "", x)
	b := mustCall(t, g, OpUnsqueeze, Attrs{Dim: 0}, "", a)
	c := mustCall(t, g, OpReshape, Attrs{Dims: []int{24}}, "", b)
	g.Outputs = []*Node{c}
	if Simplify(g) == 0 {
		t.Fatal("no change")
	}
	mustValidate(t, g, "after Simplify")
	DCE(g)
	for Simplify(g)+DCE(g) > 0 {
	}
	if g.Outputs[0] != c || c.Args[0] != x || len(g.Nodes) != 2 {
		t.Errorf("want one reshape of x:\n%s", g)
	}
}

// constEval evaluates a few ops on []float64 constants, for FoldConstants.
func constEval(calls *[]string) func(n *Node, args []any) (any, error) {
	return func(n *Node, args []any) (any, error) {
		*calls = append(*calls, fmt.Sprintf("%s%v", n.Op.Name, args))
		val := func(a any, i int) float64 {
			switch a := a.(type) {
			case []float64:
				return a[i%len(a)]
			case Scalar:
				return a.Value
			}
			panic(fmt.Sprintf("operand %T", a))
		}
		out := make([]float64, Numel(n.Shape))
		for i := range out {
			switch n.Op {
			case OpAdd:
				out[i] = val(args[0], i) + val(args[1], i)
			case OpMul:
				out[i] = val(args[0], i) * val(args[1], i)
			case OpNeg:
				out[i] = -val(args[0], i)
			case OpExp:
				return nil, nil // declined
			default:
				return nil, errors.New("cannot evaluate " + n.Op.Name)
			}
		}
		return out, nil
	}
}

func TestFoldConstants(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(2), Float32, CPU, "")
	c1 := g.Const([]float64{1, 2}, shp(2), Float32, CPU, "")
	c2 := g.Const([]float64{3, 4}, shp(2), Float32, CPU, "")
	a := mustCall(t, g, OpAdd, Attrs{}, "a.go:1", c1, c2)
	b := mustCall(t, g, OpMul, Attrs{}, "a.go:2", intS(2), a)
	e := mustCall(t, g, OpExp, Attrs{}, "", b)
	d := mustCall(t, g, OpAdd, Attrs{}, "", b, x)
	g.Outputs = []*Node{d, e, b}
	var calls []string
	n, err := FoldConstants(g, constEval(&calls))
	if err != nil || n != 2 {
		t.Fatalf("FoldConstants = %d, %v; want 2 folds", n, err)
	}
	mustValidate(t, g, "after FoldConstants")
	if want := "add[[1 2] [3 4]] mul[{2 int64} [4 6]] exp[[8 12]]"; strings.Join(calls, " ") != want {
		t.Errorf("eval calls %q, want %q", strings.Join(calls, " "), want)
	}
	if a.Kind != ConstNode || b.Kind != ConstNode || fmt.Sprint(b.Value) != "[8 12]" || b.Loc != "a.go:2" {
		t.Errorf("not folded in place: a %v, b %v %v", a.Kind, b.Kind, b.Value)
	}
	if e.Kind != CallNode || d.Kind != CallNode || g.Outputs[2] != b {
		t.Error("declined or non-constant calls folded")
	}
	if b.TypeString() != "float32[2]" || b.Op != nil || b.Args != nil {
		t.Errorf("folded node %s keeps call fields", b.TypeString())
	}
	if DCE(g) != 3 { // c1, c2 and the folded a
		t.Errorf("constants feeding folded nodes should be dead:\n%s", g)
	}

	// nil operands reach eval as nil; errors stop the pass
	g = &Graph{}
	cx := g.Const([]float64{1, 2}, shp(1, 2), Float32, CPU, "")
	ln := mustCall(t, g, OpLayerNorm, Attrs{Dims: []int{2}}, "", cx, nil, nil)
	g.Outputs = []*Node{ln}
	var got []any
	_, err = FoldConstants(g, func(n *Node, args []any) (any, error) {
		got = args
		return nil, errors.New("boom")
	})
	if err == nil || !strings.Contains(err.Error(), "boom") || len(got) != 3 || got[1] != nil || got[2] != nil {
		t.Errorf("err %v, args %v", err, got)
	}
	if ln.Kind != CallNode {
		t.Error("failed fold changed the node")
	}
}

func TestDecompose(t *testing.T) {
	type tc struct {
		name  string
		op    *Op
		attrs Attrs
		shape []int
		extra func(g *Graph, dt DType) []Value
	}
	param := func(shape ...int) func(g *Graph, dt DType) []Value {
		return func(g *Graph, dt DType) []Value {
			return []Value{g.Input(shape, dt, CPU, ""), g.Input(shape, dt, CPU, "")}
		}
	}
	none := func(k int) func(g *Graph, dt DType) []Value {
		return func(*Graph, DType) []Value { return make([]Value, k) }
	}
	cases := []tc{
		{"softmax", OpSoftmax, Attrs{Dim: -1}, shp(4, 8), none(0)},
		{"log_softmax", OpLogSoftmax, Attrs{Dim: 0}, shp(4, 8), none(0)},
		{"layer_norm affine", OpLayerNorm, Attrs{Dims: []int{8}, Scalars: []float64{1e-5}}, shp(2, 3, 8), param(8)},
		{"layer_norm plain", OpLayerNorm, Attrs{Dims: []int{3, 8}}, shp(2, 3, 8), none(2)},
		{"rms_norm weight", OpRMSNorm, Attrs{Dims: []int{8}, Scalars: []float64{1e-6}}, shp(2, 8), func(g *Graph, dt DType) []Value {
			return []Value{g.Input(shp(8), dt, CPU, "")}
		}},
		{"rms_norm plain", OpRMSNorm, Attrs{Dims: []int{8}}, shp(2, 8), none(1)},
		{"var", OpVar, Attrs{Dims: []int{1}, Scalars: []float64{1}}, shp(4, 8), none(0)},
		{"var keepdim all", OpVar, Attrs{KeepDim: true, Scalars: []float64{0}}, shp(4, 8), none(0)},
		{"linear bias", OpLinear, Attrs{}, shp(4, 8), func(g *Graph, dt DType) []Value {
			return []Value{g.Input(shp(16, 8), dt, CPU, ""), g.Input(shp(16), dt, CPU, "")}
		}},
		{"linear plain", OpLinear, Attrs{}, shp(2, 4, 8), func(g *Graph, dt DType) []Value {
			return []Value{g.Input(shp(16, 8), dt, CPU, ""), nil}
		}},
	}
	for _, c := range cases {
		for _, dt := range []DType{Float32, Float16, BFloat16, Float64} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				g := &Graph{}
				x := g.Input(c.shape, dt, CPU, "")
				args := append([]Value{x}, c.extra(g, dt)...)
				comp := mustCall(t, g, c.op, c.attrs, "model.go:5", args...)
				user := mustCall(t, g, OpNeg, Attrs{}, "model.go:6", comp)
				g.Outputs = []*Node{comp, user}
				meta := comp.TypeString()
				inputs := len(g.Inputs)
				n, err := Decompose(g)
				if err != nil || n != 1 {
					t.Fatalf("Decompose = %d, %v", n, err)
				}
				mustValidate(t, g, "after Decompose")
				for _, nd := range g.Nodes {
					if nd.Kind == CallNode && nd.Op.Kind == Composite {
						t.Errorf("composite %s left", nd.Name())
					}
					if nd.Kind == CallNode && nd != user && nd.Loc != "model.go:5" {
						t.Errorf("%s has loc %q", nd.Name(), nd.Loc)
					}
				}
				out := g.Outputs[0]
				if out == comp || out.TypeString() != meta {
					t.Errorf("output %s %s, want a new node of %s", out.Name(), out.TypeString(), meta)
				}
				if user.Args[0] != out || g.Outputs[1] != user || len(g.Inputs) != inputs {
					t.Error("user or outputs not rewired")
				}
				if (dt == Float16 || dt == BFloat16) && c.op != OpLinear {
					if countOp(g, OpCast) != 2 || out.Op != OpCast || out.Args[0].(*Node).DType != Float32 {
						t.Errorf("16-bit input should be computed in float32 and cast back:\n%s", g)
					}
				} else if countOp(g, OpCast) != 0 {
					t.Errorf("unexpected casts:\n%s", g)
				}
				if n, _ := Decompose(g); n != 0 {
					t.Error("Decompose is not idempotent")
				}
			})
		}
	}
}

func TestDecomposeNestedAndFailing(t *testing.T) {
	// A composite defined through another composite expands fully.
	nested := &Op{Name: "test_double_softmax", Title: "DoubleSoftmax", Kind: Composite, Arity: 1, Rule: FloatOnly,
		Decompose: func(b Builder, a Attrs, args ...Value) (Value, error) {
			s := b.Apply(OpSoftmax, Attrs{Dim: -1}, args[0])
			return b.Apply(OpSoftmax, Attrs{Dim: 0}, s), nil
		}}
	// One that fails after metadata inference succeeded.
	fail := false
	failing := &Op{Name: "test_failing", Title: "Failing", Kind: Composite, Arity: 1, Rule: FloatOnly,
		Decompose: func(b Builder, a Attrs, args ...Value) (Value, error) {
			v := b.Apply(OpNeg, Attrs{}, args[0])
			if fail {
				return nil, errors.New("boom")
			}
			return v, nil
		}}
	g := &Graph{}
	x := g.Input(shp(3, 4), Float32, CPU, "")
	f := mustCall(t, g, failing, Attrs{}, "", x)
	d := mustCall(t, g, nested, Attrs{}, "", f)
	g.Outputs = []*Node{d}
	fail = true
	n, err := Decompose(g)
	fail = false
	if n != 1 || err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Decompose = %d, %v", n, err)
	}
	mustValidate(t, g, "after a failed Decompose")
	if countOp(g, OpExp) != 2 || countOp(g, failing) != 1 || countOp(g, OpNeg) != 0 || countOp(g, OpSoftmax) != 0 {
		t.Errorf("want the nested composite expanded and the failing one kept:\n%s", g)
	}
}

func TestOptimize(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(4, 8), Float16, CPU, "")
	unused := g.Input(shp(2), Float32, CPU, "")
	w := g.Const([]float64{2}, shp(1), Float32, CPU, "")
	w2 := mustCall(t, g, OpMul, Attrs{}, "", w, intS(3)) // folds
	s1 := mustCall(t, g, OpSoftmax, Attrs{Dim: -1}, "", x)
	s2 := mustCall(t, g, OpSoftmax, Attrs{Dim: -1}, "", x) // CSE'd with s1
	one := mustCall(t, g, OpMul, Attrs{}, "", s2, intS(1)) // simplified
	sum := mustCall(t, g, OpAdd, Attrs{}, "", s1, one)
	t2 := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", sum)
	t3 := mustCall(t, g, OpTranspose, Attrs{Dim: 1, Dim2: 0}, "", t2) // simplified
	scaled := mustCall(t, g, OpMul, Attrs{}, "", t3, w2)
	mustCall(t, g, OpExp, Attrs{}, "", x) // dead
	g.Outputs = []*Node{scaled, sum}
	metas := []string{scaled.TypeString(), sum.TypeString()}
	var calls []string
	n, err := Optimize(g, constEval(&calls))
	if err != nil || n == 0 {
		t.Fatalf("Optimize = %d, %v", n, err)
	}
	mustValidate(t, g, "after Optimize")
	for i, o := range g.Outputs {
		if o.TypeString() != metas[i] {
			t.Errorf("output %d is %s, want %s", i, o.TypeString(), metas[i])
		}
	}
	for _, nd := range g.Nodes {
		if nd.Kind == CallNode && nd.Op.Kind == Composite {
			t.Errorf("composite %s left", nd.Name())
		}
	}
	if countOp(g, OpExp) != 1 || countOp(g, OpTranspose) != 0 || countOp(g, OpAMax) != 1 {
		t.Errorf("want one softmax's worth of ops, no transposes:\n%s", g)
	}
	if w2.Kind != ConstNode || scaled.Args[1] != w2 || g.Outputs[0] != scaled || g.Outputs[1] != sum {
		t.Errorf("constant not folded or outputs moved:\n%s", g)
	}
	if len(g.Inputs) != 2 || g.Inputs[1] != unused || g.Nodes[1] != unused {
		t.Error("inputs changed")
	}
	if n, err := Optimize(g, nil); n != 0 || err != nil {
		t.Errorf("second Optimize = %d, %v; want a fixed point", n, err)
	}
}

// Every pass keeps a graph valid, on a graph that exercises all of them.
func TestPassesPreserveValidity(t *testing.T) {
	build := func(t *testing.T) *Graph {
		g := &Graph{}
		x := g.Input(shp(2, 3, 8), BFloat16, CPU, "")
		ids := g.Input(shp(5), Int64, CPU, "")
		emb := g.Const(nil, shp(10, 8), Float32, CPU, "")
		wt := g.Const(nil, shp(8, 8), Float32, CPU, "")
		e := mustCall(t, g, OpEmbedding, Attrs{}, "", ids, emb)
		e = mustCall(t, g, OpLinear, Attrs{}, "", e, wt, nil)
		ln := mustCall(t, g, OpLayerNorm, Attrs{Dims: []int{8}}, "", x, nil, nil)
		ln2 := mustCall(t, g, OpLayerNorm, Attrs{Dims: []int{8}}, "", x, nil, nil)
		r := mustCall(t, g, OpReshape, Attrs{Dims: []int{6, 8}}, "", mustCall(t, g, OpAdd, Attrs{}, "", ln, ln2))
		r = mustCall(t, g, OpCast, Attrs{DType: Float32}, "", r)
		cat := mustCall(t, g, OpCat, Attrs{Dim: 0}, "", r, e)
		v := mustCall(t, g, OpVar, Attrs{Dims: []int{1}}, "", cat)
		g.Outputs = []*Node{v, cat, x}
		return g
	}
	eval := func(n *Node, args []any) (any, error) { return "folded", nil }
	for _, p := range []struct {
		name string
		run  func(g *Graph) (int, error)
	}{
		{"DCE", func(g *Graph) (int, error) { return DCE(g), nil }},
		{"CSE", func(g *Graph) (int, error) { return CSE(g), nil }},
		{"Simplify", func(g *Graph) (int, error) { return Simplify(g), nil }},
		{"FoldConstants", func(g *Graph) (int, error) { return FoldConstants(g, eval) }},
		{"Decompose", Decompose},
		{"Optimize", func(g *Graph) (int, error) { return Optimize(g, eval) }},
	} {
		t.Run(p.name, func(t *testing.T) {
			g := build(t)
			mustValidate(t, g, "before")
			before := g.Key()
			var metas []string
			for _, o := range g.Outputs {
				metas = append(metas, o.TypeString())
			}
			if _, err := p.run(g); err != nil {
				t.Fatal(err)
			}
			mustValidate(t, g, "after "+p.name)
			for i, o := range g.Outputs {
				if o.TypeString() != metas[i] {
					t.Errorf("output %d: %s, want %s", i, o.TypeString(), metas[i])
				}
			}
			if g.Outputs[2] != g.Inputs[0] {
				t.Error("input output moved")
			}
			if p.name == "DCE" && g.Key() != before {
				t.Error("DCE changed a graph without dead nodes")
			}
		})
	}
}

// SinkCasts turns slices of a cast into casts of slices, and a cast of a
// Cat into a Cat of casts (each part cast to the Cat's type first); casts
// with another reader, and outputs, stay.
func TestSinkCasts(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(2, 8), BFloat16, CPU, "")
	c := mustCall(t, g, OpCast, Attrs{DType: Float32}, "", x)
	lo := mustCall(t, g, OpSlice, Attrs{Dim: 1, Start: 0, Stop: 4, Step: 1}, "", c)
	hi := mustCall(t, g, OpSlice, Attrs{Dim: 1, Start: 4, Stop: 8, Step: 1}, "", c)
	a := mustCall(t, g, OpSub, Attrs{}, "", lo, hi)
	h := g.Input(shp(2, 4), Float16, CPU, "")
	cat := mustCall(t, g, OpCat, Attrs{Dim: 1}, "", a, h) // float32
	out := mustCall(t, g, OpCast, Attrs{DType: BFloat16}, "", cat)
	kept := mustCall(t, g, OpCast, Attrs{DType: Float64}, "", x) // read whole too
	kv := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", kept)
	g.Outputs = []*Node{out, kept, kv}
	if n := SinkCasts(g); n != 3 {
		t.Fatalf("SinkCasts made %d rewrites, want 3 (two slices, one Cat):\n%s", n, g)
	}
	mustValidate(t, g, "after SinkCasts")
	DCE(g)
	for _, n := range g.Nodes {
		if n.Op == OpSlice && argNode(n, 0) != x {
			t.Errorf("%s slices %s, want the input", n.Name(), argNode(n, 0).Name())
		}
		if n.Op == OpCat {
			for _, p := range n.Args {
				if pn := p.(*Node); pn.Op != OpCast || pn.DType != BFloat16 {
					t.Errorf("Cat part %s, want a cast to bfloat16", pn.Name())
				}
			}
			if h := argNode(argNode(n, 1), 0); h.Op != OpCast || h.DType != Float32 || argNode(h, 0).Kind != InputNode {
				t.Errorf("the float16 part is not cast to the Cat's float32 first:\n%s", g)
			}
		}
	}
	if g.Outputs[1] != kept || argNode(g.Outputs[2], 0) != kept {
		t.Errorf("a cast that is an output, and its view, moved:\n%s", g)
	}
	if g.Outputs[0].Op != OpCat || g.Outputs[0].DType != BFloat16 {
		t.Errorf("output 0 is %s, want the Cat of casts", g.Outputs[0].TypeString())
	}
}

// SplitCasts gives each pointwise reader of a widening cast its own copy,
// and leaves a cast a reduction reads, and narrowing casts of three
// readers, whole.
func TestSplitCasts(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(4), BFloat16, CPU, "")
	c := mustCall(t, g, OpCast, Attrs{DType: Float32}, "", x)
	a := mustCall(t, g, OpExp, Attrs{}, "", c)
	b := mustCall(t, g, OpNeg, Attrs{}, "", c)
	r := mustCall(t, g, OpCast, Attrs{DType: Float32}, "", x)
	s := mustCall(t, g, OpSum, Attrs{Dims: []int{0}}, "", r)
	e := mustCall(t, g, OpExp, Attrs{}, "", r)
	y := g.Input(shp(4), Float32, CPU, "")
	n := mustCall(t, g, OpCast, Attrs{DType: BFloat16}, "", y)
	n1 := mustCall(t, g, OpNeg, Attrs{}, "", n)
	n2 := mustCall(t, g, OpExp, Attrs{}, "", n)
	n3 := mustCall(t, g, OpAbs, Attrs{}, "", n)
	g.Outputs = []*Node{a, b, s, e, n1, n2, n3}
	if got := SplitCasts(g); got != 1 {
		t.Fatalf("SplitCasts made %d copies, want 1:\n%s", got, g)
	}
	mustValidate(t, g, "after SplitCasts")
	if a.Args[0] != c || b.Args[0] == c || argNode(b, 0).Op != OpCast || argNode(b, 0).Args[0] != x {
		t.Errorf("exp and neg do not read copies of one cast:\n%s", g)
	}
	if s.Args[0] != r || e.Args[0] != r || n1.Args[0] != n || n3.Args[0] != n {
		t.Errorf("a cast read by a sum, or a narrowing cast of three readers, was split:\n%s", g)
	}
}
