package inductor

import (
	"fmt"
	"hash/fnv"
	"strings"

	"gocompile/ir"
)

// ComboKernel runs several pointwise kernels (Members, each over its own
// elements) as one launch: member i takes blocks [end(i-1), end(i)) of
// the grid, as a multi-tensor kernel does, so that an optimizer's update
// of every parameter, or any independent small regions of different
// shapes (fuse.Horizontal's combos, such as the rotations of a decode
// step's queries and keys), cost one launch instead of one each.
type ComboKernel struct {
	// Members are dense kernels or N-d ones (Strided, with a geometry
	// parameter of their own), not tiled ones.
	Members []PointwiseKernel
}

// Name is the kernel's entry point, unique for its members (whose names
// decide how the source labels them).
func (c *ComboKernel) Name() string {
	h := fnv.New64a()
	for i := range c.Members {
		fmt.Fprintln(h, c.Members[i].Name())
	}
	return fmt.Sprintf("gc_combo%d_%016x", len(c.Members), h.Sum64())
}

// generated gives the members as their device functions are generated:
// each labelled by its position among the distinct kernels, so that two
// members with the same expression but other operands do not define one
// device function twice.
func (c *ComboKernel) generated() []PointwiseKernel {
	var named []PointwiseKernel
	distinct := map[string]int{}
	for _, k := range c.Members {
		name := k.Name()
		if _, ok := distinct[name]; !ok {
			distinct[name] = len(distinct)
		}
		k.member = true
		k.Expr, k.Label = k.expr(), fmt.Sprintf("%s_c%d", k.label(), distinct[name])
		k.Op = nil // a member is named by its label
		named = append(named, k)
	}
	return named
}

// Source generates the CUDA C: each distinct member's body as a device
// function, then the kernel, which finds its block's member and calls its
// body. Parameters, in order, per member: the member kernel's parameters
// (see PointwiseKernel.Source: n, its pointers, scalars, aligned, inners),
// then long long end, the first block past the member's. An N-d
// member's parameters end with its geometry (PointwiseKernel.Bytes), and
// its blocks are PointwiseKernel.Launch's grid.
func (c *ComboKernel) Source() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile combo kernel of %d fused members, each a range of blocks\n", len(c.Members))
	var outs []ir.DType
	for _, k := range c.Members {
		outs = append(outs, k.outDTypes()...)
	}
	b.WriteString(fast16(outs...))
	b.WriteString(cudaPrelude)
	b.WriteString(divisorC)
	defined := map[string]bool{}
	var params, calls []string
	for i, k := range c.generated() {
		body, kparams, err := k.bodyParams()
		if err != nil {
			return "", fmt.Errorf("combo member %d: %w", i, err)
		}
		if k.Tile {
			return "", fmt.Errorf("combo member %d (%s) is a tiled kernel", i, k.Name())
		}
		if !defined[k.Name()] {
			defined[k.Name()] = true
			fmt.Fprintf(&b, "\n// member %d: %s\n%s", i, k.label(), body)
		}
		var names []string
		for _, p := range kparams {
			name := p[strings.LastIndexAny(p, " *")+1:]
			params = append(params, fmt.Sprintf("%s_m%d", p, i))
			names = append(names, fmt.Sprintf("%s_m%d", name, i))
		}
		params = append(params, fmt.Sprintf("long long end_m%d", i))
		start := "0LL"
		if i > 0 {
			start = fmt.Sprintf("end_m%d", i-1)
		}
		calls = append(calls, fmt.Sprintf("  if (b < end_m%d) {\n    %s_body(%s,\n        b - %s, end_m%d - %s);\n    return;\n  }\n",
			i, k.Name(), strings.Join(names, ", "), start, i, start))
	}
	fmt.Fprintf(&b, "\nextern \"C\" __global__ void %s(\n    %s) {\n  gc_dependent_entry();\n  const long long b = blockIdx.x;\n%s}\n",
		c.Name(), strings.Join(params, ",\n    "), strings.Join(calls, ""))
	return b.String(), nil
}
