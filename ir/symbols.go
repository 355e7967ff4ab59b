package ir

// Symbolic shapes. A graph traced for dynamic dims keeps its example sizes
// in Shape; Sym says which dims are symbolic. InferSymbols finds them by
// running the graph's shape rules again with each symbol at a probe size
// no example uses: a dim that then equals a symbol's probe is that symbol,
// a dim that stays put is static, and a dim that moves to another size is
// derived from symbols (printed "?").

// SymStatic, and symbol k stored as k+1, and SymDerived are the values of
// Node.Sym entries.
const (
	SymStatic  = 0
	SymDerived = -1
)

func probe(k int) int { return 100003 + 1009*k }

// InferSymbols sets Sym on every node from the symbols of the inputs'
// dims: inputs[i][d] is k+1 when dim d of input i is symbol k, 0 when it
// is static. It leaves a node's dims derived where its shape rule cannot
// be evaluated at the probe sizes.
func (g *Graph) InferSymbols(inputs [][]int) {
	shadow := make(map[*Node]*Node, len(g.Nodes))
	syms := map[int]int{} // probe size → symbol+1
	for _, n := range g.Nodes {
		s := &Node{Kind: n.Kind, DType: n.DType, Device: n.Device, Shape: clone(n.Shape)}
		switch n.Kind {
		case InputNode:
			if n.Index < len(inputs) {
				for d, k := range inputs[n.Index] {
					if k > 0 && d < len(s.Shape) {
						s.Shape[d] = probe(k - 1)
						syms[probe(k-1)] = k
					}
				}
			}
		case CallNode:
			args := mappedArgs(n, shadow)
			shape, _, _, err := InferMeta(n.Op, n.Attrs, args)
			if err != nil || len(shape) != len(n.Shape) {
				n.Sym = make([]int, len(n.Shape))
				for d := range n.Sym {
					n.Sym[d] = SymDerived
				}
				shadow[n] = s // the example shape: downstream dims read as static
				continue
			}
			s.Shape = shape
		}
		shadow[n] = s
		n.Sym = nil
		for d := range n.Shape {
			k := SymStatic
			switch {
			case s.Shape[d] == n.Shape[d]:
			case syms[s.Shape[d]] > 0:
				k = syms[s.Shape[d]]
			default:
				k = SymDerived
			}
			if k != SymStatic && n.Sym == nil {
				n.Sym = make([]int, len(n.Shape))
			}
			if n.Sym != nil {
				n.Sym[d] = k
			}
		}
	}
}
