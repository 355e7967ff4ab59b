package tensor

import (
	"fmt"
	"slices"

	"gocompile/array"
	"gocompile/ir"
)

// Writes into a compiled function's arguments. An argument's proxy stands
// for the argument's elements in row-major order, whatever the caller's
// layout, and every view taken of it inside fn (Narrow, Transpose, Select,
// View …) keeps its layout over those elements. A write through any of
// them (Copy, Fill, Set, IndexCopyInPlace, IndexPutInPlace) records a new
// version of the elements, AsStridedScatter (or AsStridedIndexCopy) of the
// previous one, as a write into a captured tensor does (mutation.go), and
// from then on every read of the argument or of any view of it, taken
// before the write or after, is AsStrided of the latest version. The last
// version is an output of the graph, copied into the caller's tensor when
// the program has run (or written there in place, markInPlace): only the
// elements of that tensor change, the rest of its storage does not.
// Unlike a captured tensor's, an argument's reads before its first write
// are graph ops already, so no second trace is needed. A written
// argument must not share memory with another argument or a captured
// tensor fn uses: eagerly those would see the write, compiled they would
// not.

// argState is what the tracer knows of one argument's writes.
type argState struct {
	index   int      // the argument's position among the call's tensors
	px      *proxy   // the argument's own proxy
	title   string   // the op of the first write, for errors
	writes  uint64   // how many writes fn made so far: autograd's version of it
	version *ir.Node // the latest version, flat, in the current segment
	base    *ir.Node // the argument's elements at the segment's start, flat
	// contiguous is base made contiguous, for reads.
	contiguous *ir.Node
}

// argWrite is an argument a compiled entry writes: its index among the
// call's tensors and the op of its first write.
type argWrite struct {
	index int
	title string
}

// argNode is the node of the current contents of the argument st, flat:
// its latest version in this segment, else its value as the segment
// began.
func (tr *tracer) argNode(st *argState, loc string) *ir.Node {
	if st.version != nil {
		return st.version
	}
	if st.base == nil {
		in := tr.segmentNode(st.px.node)
		n, err := tr.g.Call(ir.OpReshape, ir.Attrs{Dims: []int{ir.Numel(in.Shape)}}, loc, in)
		check(err, "Compile")
		st.base = n
	}
	return st.base
}

// readArg is the node reading the view l of the argument st, which fn
// writes, from the argument's current contents.
func (tr *tracer) readArg(st *argState, l ir.Layout, loc string) *ir.Node {
	from := tr.argNode(st, loc)
	if st.version == nil {
		// The argument as the caller laid it out (a column of a matrix):
		// AsStrided views a contiguous storage.
		if st.contiguous == nil {
			c, err := tr.g.Call(ir.OpContiguous, ir.Attrs{}, loc, from)
			check(err, "Compile")
			st.contiguous = c
		}
		from = st.contiguous
	}
	n, err := tr.g.Call(ir.OpAsStrided, ir.StridedLayout(l), loc, from)
	check(err, "Compile")
	return n
}

// writeArg records op (a write: the storage, then operands, at layout a)
// of the argument that dst views as the argument's new version.
func (tr *tracer) writeArg(dst *Tensor, loc, title string, op *ir.Op, a ir.Attrs, operands ...*Tensor) {
	st := dst.px.arg
	if st.writes == 0 {
		tr.checkArgWrite(st, title)
	}
	args := []ir.Value{tr.argNode(st, loc)}
	for _, t := range operands { // read before the write: a view of the argument sees its old contents
		args = append(args, tr.nodeOf(t, loc))
	}
	n, err := tr.g.Call(op, a, loc, args...)
	check(err, title, append([]*Tensor{dst}, operands...)...)
	if st.writes == 0 {
		st.title = title
		tr.argWrites = append(tr.argWrites, st)
	}
	st.writes++
	st.version = n
}

// checkArgWrite panics with an *Error if the argument st, about to be
// written by op for the first time, cannot be written as eagerly: several
// of its elements are one (an Expand view), it shares memory with another
// argument, or with a tensor fn writes or reads by reference.
func (tr *tracer) checkArgWrite(st *argState, op string) {
	t := tr.args[st.index]
	t.noOverlap(op)
	noSharedArgument(tr.args, st.index, op)
	if tr.mut.known[t.v.StorageKey()] || writerOf([]ir.Value{t}) != nil {
		panic(argSharesCapture(t, st.index, op, "writes"))
	}
	for c := range tr.consts {
		if c.v.SharesStorage(t.v) {
			panic(argSharesCapture(t, st.index, op, "reads"))
		}
	}
}

// checkCaptured panics with an *Error if c, a captured tensor fn reads,
// shares memory with an argument fn has written: the graph would read c
// as it was before the call.
func (tr *tracer) checkCaptured(c *Tensor) {
	for _, st := range tr.argWrites {
		if t := tr.args[st.index]; t.v.SharesStorage(c.v) {
			panic(argSharesCapture(t, st.index, st.title, "reads"))
		}
	}
}

// noSharedArgument panics with an *Error if argument i, which op writes,
// shares memory with another argument: eagerly the other would see the
// write, compiled it would not.
func noSharedArgument(args []*Tensor, i int, op string) {
	t := args[i]
	for j, u := range args {
		if j != i && u != nil && u.v.SharesStorage(t.v) {
			panic(&Error{Op: op, Shapes: [][]int{t.shape(), u.shape()},
				Reason: fmt.Sprintf("argument tensor %d, which the compiled function writes, shares memory with argument tensor %d", i, j),
				Fix:    "pass tensors that do not overlap (Clone one of them), or pass the tensor once"})
		}
	}
}

// argSharesCapture is the error for argument i, which op writes, sharing
// memory with a tensor the function captures and reads or writes.
func argSharesCapture(t *Tensor, i int, op, how string) *Error {
	return &Error{Op: op, Shapes: [][]int{t.shape()},
		Reason: fmt.Sprintf("argument tensor %d, which the compiled function writes, shares memory with a tensor the function captures and %s", i, how),
		Fix:    "pass a copy (Clone), or write the captured tensor itself inside the function"}
}

// checkArgWrites makes checkArgWrite's checks on a call of an entry that
// writes the arguments ws: consts holds the storages its graph reads by
// reference.
func checkArgWrites(ts []*Tensor, ws []argWrite, consts map[any]bool) {
	for _, w := range ws {
		t := ts[w.index]
		t.noOverlap(w.title)
		noSharedArgument(ts, w.index, w.title)
		if consts[t.v.StorageKey()] {
			panic(argSharesCapture(t, w.index, w.title, "reads"))
		}
	}
}

// argVersions lists the last versions of the arguments written in this
// segment, each in its argument's shape, and those arguments.
func (tr *tracer) argVersions() ([]*ir.Node, []*Tensor) {
	var nodes []*ir.Node
	var args []*Tensor
	for _, st := range tr.argWrites {
		if st.version != nil {
			nodes = append(nodes, tr.readArg(st, st.whole(), "write-back"))
			args = append(args, tr.args[st.index])
		}
	}
	return nodes, args
}

// whole is the layout of the argument st itself over its elements.
func (st *argState) whole() ir.Layout {
	shape := st.px.node.Shape
	return ir.Layout{Shape: shape, Strides: ir.ContiguousStrides(shape)}
}

// writeArgs copies each written argument's last version into it, unless
// the program wrote it in place (markInPlace).
func writeArgs(args, versions []*Tensor) {
	for i, t := range args {
		v := versions[i].v
		if !v.SharesStorage(t.v) || !v.Layout().Same(t.v.Layout()) {
			array.CopyInto(t.v, v)
			continue
		}
		t.v.CountWrite() // written in place by the program
	}
}

// entryArgWrites lists the arguments tr's function wrote, and, per tensor
// of its flattened results, the argument it is (-1 for none): such a
// result is the caller's tensor itself after the write-back, as eagerly,
// and a result that is any other view of a written argument is a new
// tensor holding the written values.
func (tr *tracer) entryArgWrites(results []*Tensor) ([]argWrite, []int) {
	if len(tr.argWrites) == 0 {
		return nil, nil
	}
	ws := make([]argWrite, len(tr.argWrites))
	for i, st := range tr.argWrites {
		ws[i] = argWrite{index: st.index, title: st.title}
	}
	return ws, tr.resultArgs(results)
}

// resultArgs says, per result, which written argument it is itself (-1:
// none); nil when none is.
func (tr *tracer) resultArgs(results []*Tensor) []int {
	var which []int
	for k, t := range results {
		if t == nil || t.px == nil || t.px.arg == nil || t.px.arg.writes == 0 || t.px != t.px.arg.px {
			continue
		}
		if which == nil {
			which = slices.Repeat([]int{-1}, len(results))
		}
		which[k] = t.px.arg.index
	}
	return which
}

// giveArgs puts the caller's tensors in place of the results that are the
// arguments themselves (resultArgs).
func giveArgs(outs []*Tensor, which []int, args []*Tensor) {
	for k, i := range which {
		if i >= 0 {
			outs[k] = args[i]
		}
	}
}

// detachRealized replaces the values of finished segments' nodes that
// view one of stores, which the segment just run writes back into, by
// copies, so that later segments read them as they were: all but the
// arguments' own values, whose readers read the written contents.
func (tr *tracer) detachRealized(stores []*array.Array) {
	if len(stores) == 0 {
		return
	}
	own := map[*ir.Node]bool{}
	for p := range tr.argOf {
		own[p.px.node] = true
	}
	for n, v := range tr.realized {
		if own[n] {
			continue
		}
		for _, s := range stores {
			if v != nil && v.v.SharesStorage(s) {
				c := array.New(v.v.Device(), v.dtype(), v.shape())
				array.CopyInto(c, v.v)
				tr.realized[n] = wrap(c)
				break
			}
		}
	}
}

// constStorages is the set of storages g's constants view.
func constStorages(g *ir.Graph) map[any]bool {
	keys := map[any]bool{}
	for _, n := range g.Nodes {
		if a, ok := n.Value.(*array.Array); ok && n.Kind == ir.ConstNode {
			keys[a.StorageKey()] = true
		}
	}
	return keys
}
