package program

import (
	"slices"

	"gocompile/array"
	"gocompile/fuse"
	"gocompile/ir"
)

// In-place Cats: the kernels computing a Cat's parts (a rotary
// embedding's two halves) write them into their slices of the Cat's
// result, which the first of them allocates, and the Cat copies only the
// parts no kernel wrote (fuse.InPlaceCats).

// catStore is a Cat whose parts kernels write in place: the Cat's node,
// its normalised dim, and per argument its slice of the result (a fresh,
// contiguous tensor).
type catStore struct {
	node  *ir.Node
	dim   int
	parts []catSlice
}

// catSlice is a Cat argument (node index value) and the layout of its
// slice of the result (its elements [off, off+size) along the Cat's dim).
type catSlice struct {
	value  int
	layout ir.Layout
}

// catRef names part part of the program's Cat cat (-1: none), where a
// group step's member writes its value.
type catRef struct{ cat, part int }

// InPlaceCats is fuse.InPlaceCats for the regions of a program (what
// Explain reports): the parts computed by fused pointwise regions and
// groups, which run as generated kernels writing into the buffers they
// are given.
func InPlaceCats(g *ir.Graph, regions []*fuse.Region) map[*ir.Node][]*fuse.CatPart {
	return fuse.InPlaceCats(g, regions, catKernel)
}

// catKernel reports whether the program runs r as a group step, whose
// kernels write each member's value into the buffer it is given, in any
// layout: a fused pointwise region, a horizontal group or combo of them
// (a combo's member whose buffer is a slice runs as a kernel of its own
// on a GPU), or a lone op, which findCatStores gives a step of its own.
func catKernel(r *fuse.Region) bool { return r.Group != nil || r.Fused() }

// findCatStores sets up the program's in-place Cats: each Cat step's
// store, and on the steps computing its parts where each member writes.
func (p *inductorProgram) findCatStores(regions []*fuse.Region) {
	cats := InPlaceCats(p.g, regions)
	if cats == nil {
		return
	}
	stepOf := map[*fuse.Region]int{}
	for i := range p.steps {
		stepOf[p.steps[i].r] = i
	}
	for i := range p.steps {
		s := &p.steps[i]
		parts, ok := cats[s.r.Root]
		if !ok || s.group != nil || s.row != nil {
			continue
		}
		n := s.r.Root
		c := catStore{node: n, dim: n.Attrs.Dim}
		if c.dim < 0 {
			c.dim += len(n.Shape)
		}
		off, strides := 0, ir.ContiguousStrides(n.Shape)
		for j, a := range n.Args {
			an := a.(*ir.Node)
			shape := slices.Clone(n.Shape)
			shape[c.dim] = an.Shape[c.dim]
			c.parts = append(c.parts, catSlice{value: p.index[an], layout: ir.Layout{Shape: shape, Strides: strides, Offset: off * strides[c.dim]}})
			off += shape[c.dim]
			pt := parts[j]
			if pt == nil {
				continue
			}
			t := &p.steps[stepOf[pt.Region]]
			if t.group == nil && t.row == nil && t.r.Fused() { // a lone op: a kernel of its own
				p.kernelStep(t)
			}
			if t.group == nil {
				continue
			}
			if t.catOut == nil {
				t.catOut = slices.Repeat([]catRef{{cat: -1}}, len(t.r.Members()))
			}
			t.catOut[pt.Member] = catRef{cat: len(p.cats), part: j}
		}
		p.cats = append(p.cats, c)
		s.cat = len(p.cats)
	}
}

// catSlice is where member value of type dt and shape on dev goes in the
// Cat r names: its slice of the Cat's result, which the first part to
// need it allocates in cats (a run's results so far), or nil where the
// value does not fit the slice.
func (p *inductorProgram) catSlice(cats []*array.Array, r catRef, dev ir.Device, dt ir.DType, shape []int) *array.Array {
	c := &p.cats[r.cat]
	part, n := c.parts[r.part], c.node
	if dt != n.DType || !ir.SameShape(shape, part.layout.Shape) {
		return nil
	}
	buf := cats[r.cat]
	if buf == nil {
		buf = array.New(dev, n.DType, n.Shape)
		cats[r.cat] = buf
	} else if buf.Device() != dev {
		return nil
	}
	return buf.WithLayout(part.layout)
}

// finishCat completes Cat c's result buf, which some of its parts' kernels
// wrote: it copies in the parts that are not there yet.
func (c *catStore) finish(buf *array.Array, vals []*array.Array, q *array.LaunchQueue) {
	for _, part := range c.parts {
		if v := vals[part.value]; !v.SharesStorage(buf) {
			q.Drain() // the copy launches now
			array.CopyInto(buf.WithLayout(part.layout), v)
		}
	}
}
