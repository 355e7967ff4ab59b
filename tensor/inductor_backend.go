package tensor

import (
	"fmt"
	"hash/fnv"
	"log/slog"

	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
)

// The "inductor" backend runs a graph as fusion regions (package fuse):
// each fused pointwise region is one kernel that reads the region's inputs
// once and writes its result once, with no intermediate tensors: on the
// CPU a block program of the region's expression, on a GPU a CUDA kernel
// generated from it. Other nodes run with the eager kernels.

func init() {
	RegisterBackend("inductor", BackendFunc(newInductorProgram))
}

type inductorProgram struct {
	g     *ir.Graph
	index map[*ir.Node]int
	steps []inductorStep
}

type inductorStep struct {
	r     *fuse.Region
	root  int
	args  []int     // node indices of a fused region's inputs
	kinds []ir.Kind // the kind each input is loaded in
	blk   *ir.Block // the CPU program of a fused region
	label string    // a fused region's kernel label
	row   *rowStep  // a row region
}

func newInductorProgram(g *ir.Graph) (Program, error) {
	regions, err := fuse.Partition(g)
	if err != nil {
		return nil, err
	}
	p := &inductorProgram{g: g, index: make(map[*ir.Node]int, len(g.Nodes))}
	for i, n := range g.Nodes {
		p.index[n] = i
	}
	for _, r := range regions {
		s := inductorStep{r: r, root: p.index[r.Root]}
		if r.Row != nil {
			for _, in := range r.Inputs {
				s.args = append(s.args, p.index[in.Node])
			}
			if s.row, err = newRowStep(r, ir.CompileBlock); err != nil {
				return nil, err
			}
		} else if r.Fused() && len(r.Nodes) > 1 {
			for _, in := range r.Inputs {
				s.args = append(s.args, p.index[in.Node])
				s.kinds = append(s.kinds, in.Kind)
			}
			if s.blk, err = ir.CompileBlock(r.Expr, s.kinds, r.Compute); err != nil {
				return nil, fmt.Errorf("region %v: %w", r, err)
			}
			h := fnv.New64a()
			fmt.Fprint(h, r.Expr.String())
			s.label = fmt.Sprintf("fused%d_%x", len(r.Nodes), h.Sum64()>>32)
		}
		p.steps = append(p.steps, s)
	}
	if logOn("fusion") {
		for _, s := range p.steps {
			switch {
			case s.row != nil:
				slog.Info("gocompile: fusion", "region", s.r.String(), "nodes", s.r.Describe(), "kernel", "row")
			case s.blk != nil:
				slog.Info("gocompile: fusion", "region", s.r.String(), "nodes", s.r.Describe(), "expr", s.r.Expr.String())
			}
		}
	}
	return p, nil
}

func (p *inductorProgram) Run(inputs []*Tensor) []*Tensor {
	vals := make([]*Tensor, len(p.g.Nodes))
	for i, n := range p.g.Nodes {
		switch n.Kind {
		case ir.InputNode:
			vals[i] = inputs[n.Index]
		case ir.ConstNode:
			vals[i] = n.Value.(*Tensor)
		}
	}
	for _, s := range p.steps {
		n := s.r.Root
		if s.row != nil {
			args := make([]*Tensor, len(s.args))
			for j, a := range s.args {
				args[j] = vals[a]
			}
			vals[s.root] = s.row.run(args)
			continue
		}
		if s.blk == nil { // a node of its own: the eager kernel
			vals[s.root] = runNode(n, n.Attrs, nodeArgs(n, vals, p.index))
			continue
		}
		args := make([]ir.Value, len(s.args))
		for j, a := range s.args {
			args[j] = vals[a]
		}
		vals[s.root] = p.runFused(s, args)
	}
	out := make([]*Tensor, len(p.g.Outputs))
	for i, n := range p.g.Outputs {
		out[i] = vals[p.index[n]]
	}
	return out
}

// runFused runs a fused region over its inputs.
func (p *inductorProgram) runFused(s inductorStep, args []ir.Value) *Tensor {
	n := s.r.Root
	dev := args[0].(*Tensor).st.dev
	checkDevices(n.Op, args)
	if dev != CPU {
		k := &inductor.PointwiseKernel{Expr: s.r.Expr, Label: s.label, Compute: s.r.Compute, Out: n.DType}
		return gpuKernel(k, "fused "+n.Op.Title, nil, args, s.kinds, newGPUTensor(dev, n.DType, n.Shape))
	}
	return runBlock(s.blk, args, nil, n.DType, n.Shape)
}
