package tensor

import (
	"slices"
	"sync"
	"sync/atomic"

	"gocompile/array"
	"gocompile/ir"
	"gocompile/trace"
)

// Writes inside compiled functions. dst.Copy(src) inside a traced
// function, where dst is a tensor the function reaches (a captured buffer
// such as a KV cache, or a view of one) and src a traced value, does not
// write at trace time: it records a new version of dst's whole storage
// (ir.OpAsStridedScatter of the previous one), later reads of any tensor
// on that storage read the latest version (ir.OpAsStrided), and when the
// compiled program has run, the last version is copied into the storage.
// A storage written by a function is bound as such from its next trace on:
// the first trace that finds a write traces again, so that reads before
// the write are graph ops too, not values computed once while tracing.
// Writes into the function's arguments are versions too (argwrite.go).

// writers maps the storages being written by functions being traced to
// their tracer, so that ops whose operands are all concrete tensors, one
// of them on such a storage, are recorded rather than run.
var writers struct {
	m sync.Map // storage key -> *tracer
	n atomic.Int32
}

// mutation is a tracer's record of the storages its function writes.
type mutation struct {
	known    map[any]bool         // storages bound as written from the start of the trace
	versions map[any]*ir.Node     // the latest version of each storage written in this segment
	bases    map[any]*ir.Node     // each written storage's contents before the segment (a constant)
	stores   map[any]*array.Array // each written storage, whole
	order    []any                // storages in the order of their first write
	retrace  bool                 // a write to a storage not known from the start
	count    map[any]uint64       // the writes of each storage so far: autograd's version of it
}

func (m *mutation) init() {
	if m.known == nil {
		m.known = map[any]bool{}
		m.count = map[any]uint64{}
	}
}

// bind makes the tracer treat the storages keys as written from the start.
func (tr *tracer) bind(keys []any) {
	tr.mut.init()
	for _, k := range keys {
		tr.claim(k)
		tr.mut.known[k] = true
	}
}

// claim registers tr as the writer of storage k.
func (tr *tracer) claim(k any) {
	if prev, loaded := writers.m.LoadOrStore(k, tr); loaded {
		if prev.(*tracer) != tr {
			panic(&Error{Op: "Compile", Reason: "two compiled functions being traced write the same tensor at once",
				Fix: "do not share a buffer that compiled functions write between goroutines"})
		}
		return
	}
	writers.n.Add(1)
}

// release ends tr's claims on the storages it writes.
func (tr *tracer) release() {
	for k := range tr.mut.known {
		if v, ok := writers.m.Load(k); ok && v.(*tracer) == tr {
			writers.m.Delete(k)
			writers.n.Add(-1)
		}
	}
}

// writtenKeys lists the storages the tracer found written.
func (tr *tracer) writtenKeys() []any {
	var keys []any
	for k := range tr.mut.known {
		keys = append(keys, k)
	}
	return keys
}

// writerOf is the tracer writing the storage of one of args, or nil.
func writerOf(args []ir.Value) *tracer {
	if writers.n.Load() == 0 {
		return nil
	}
	for _, a := range args {
		if t, ok := a.(*Tensor); ok && t != nil && t.px == nil {
			if v, ok := writers.m.Load(t.v.StorageKey()); ok {
				return v.(*tracer)
			}
		}
	}
	return nil
}

// storageNode is the node of the current contents of the storage of the
// concrete tensor t, which the function writes: its latest version in
// this segment, else the storage itself, bound by reference.
func (tr *tracer) storageNode(t *Tensor, loc string) (*ir.Node, any) {
	whole, k := t.v.Storage()
	if n, ok := tr.mut.versions[k]; ok {
		return n, k
	}
	n, ok := tr.mut.bases[k]
	if !ok {
		n = tr.g.Const(whole, whole.Shape(), whole.DType(), whole.Device(), loc)
		tr.mut.bases[k] = n
		tr.mut.stores[k] = whole
	}
	return n, k
}

// written reports whether the concrete tensor t is on a storage the
// function writes.
func (tr *tracer) written(t *Tensor) bool {
	if len(tr.mut.known) == 0 {
		return false
	}
	return tr.mut.known[t.v.StorageKey()]
}

// readWritten is the node reading the concrete tensor t, on a storage the
// function writes, from the storage's current version.
func (tr *tracer) readWritten(t *Tensor, loc string) *ir.Node {
	base, _ := tr.storageNode(t, loc)
	n, err := tr.g.Call(ir.OpAsStrided, ir.StridedLayout(t.v.Layout()), loc, base)
	check(err, "Compile", t)
	return n
}

// write records dst.Copy(src) (op: Copy, Fill or Set) as a new version
// of dst's storage, or of the argument dst views.
func (tr *tracer) write(op string, dst, src *Tensor) {
	tr.recordWrite(dst, trace.Loc(), op, ir.OpAsStridedScatter, ir.StridedLayout(dst.v.Layout()), src)
}

// writeIndex records dst.IndexCopyInPlace(dim, index, src) as a new
// version of dst's storage, or of the argument dst views.
func (tr *tracer) writeIndex(dst *Tensor, dim int, index, src *Tensor) {
	loc := trace.Loc()
	a := ir.StridedLayout(dst.v.Layout())
	a.Dim = dim
	tr.recordWrite(dst, loc, "IndexCopyInPlace", ir.OpAsStridedIndexCopy, a, index, src)
}

// recordWrite records op (a write: the storage, then operands) of dst's
// storage as its new version, claiming the storage on its first write;
// of the argument dst views, where dst is traced (writeArg).
func (tr *tracer) recordWrite(dst *Tensor, loc, title string, op *ir.Op, a ir.Attrs, operands ...*Tensor) {
	if dst.px != nil {
		tr.writeArg(dst, loc, title, op, a, operands...)
		return
	}
	tr.mut.init()
	k := dst.v.StorageKey()
	noArgumentOn(tr.args, []any{k})
	if !tr.mut.known[k] {
		tr.claim(k)
		tr.mut.known[k] = true
		tr.mut.retrace = true
	}
	base, _ := tr.storageNode(dst, loc)
	if _, ok := tr.mut.versions[k]; !ok {
		tr.mut.order = append(tr.mut.order, k)
	}
	args := []ir.Value{base}
	for _, t := range operands {
		args = append(args, tr.nodeOf(t, loc))
	}
	n, err := tr.g.Call(op, a, loc, args...)
	check(err, title, append([]*Tensor{dst}, operands...)...)
	tr.mut.versions[k] = n
	tr.mut.count[k]++
}

// versionNodes lists the last versions of the storages written in this
// segment, in the order of their first write, and the storages.
func (tr *tracer) versionNodes() ([]*ir.Node, []*array.Array) {
	var nodes []*ir.Node
	var stores []*array.Array
	for _, k := range tr.mut.order {
		nodes = append(nodes, tr.mut.versions[k])
		stores = append(stores, tr.mut.stores[k])
	}
	return nodes, stores
}

// writeBack copies each written storage's last version into it, unless
// the program wrote the storage itself (markInPlace).
func writeBack(stores []*array.Array, vals []*Tensor) {
	for i, s := range stores {
		if v := vals[i].v; !v.SharesStorage(s) || !ir.SameShape(v.Shape(), s.Shape()) || v.Layout().Offset != 0 {
			array.CopyInto(s, v)
		} else {
			s.CountWrite() // written in place by the program
		}
	}
}

// markInPlace lets each write of g (AsStridedScatter) update its storage
// operand in place where nothing can read the old contents after it: the
// operand is the previous version of the storage, and everything computed
// from it (other than through the write) is computed before the write,
// because the write depends on it, and is no result of g; where the
// operand is the storage bound by reference (a constant), so is
// everything computed from the other constants viewing that storage (the
// tensor itself, or a folded view of it). Where the operand is an input
// (an argument the function writes, argwrite.go) it may be written in
// place too when the graph's inputs are the call's own tensors (inputs:
// a whole function's graph, not a segment, whose inputs may be values
// other segments hold). A decode step's cache write then costs the
// written rows, not a copy of the cache, an optimizer's
// m.Copy(m·β + g·(1−β)) writes m where it is, and the write-back after
// the call copies nothing.
//
// A reader the write does not depend on may still precede it when it is
// an op with a fresh result (a matrix product: a training step's backward
// reads a weight, W·dY, for the gradient of the layer below, not of W) and
// not computed from the write: in a graph whose shapes are static (static)
// the written value then becomes After(value, token), the token one
// element of that reader's result, so that the write follows it.
func markInPlace(g *ir.Graph, static, inputs bool) {
	users, result := g.Users(), g.IsOutput()
	written := map[*ir.Node]bool{} // the values writes write
	for _, n := range g.Nodes {
		if writes(n) {
			for _, a := range n.Args[1:] {
				if an, ok := a.(*ir.Node); ok {
					written[an] = true
				}
			}
		}
	}
	reordered := false
	for _, n := range g.Nodes {
		if !writes(n) {
			continue
		}
		base, ok := n.Args[0].(*ir.Node)
		if !ok || slices.Contains(n.Args[1:], ir.Value(base)) {
			continue
		}
		readers := []*ir.Node{base}
		switch base.Kind {
		case ir.ConstNode:
			arr, ok := base.Value.(*array.Array)
			if !ok {
				continue
			}
			readers = append(readers, aliases(g, base, arr)...)
		case ir.InputNode:
			if !inputs {
				continue
			}
		case ir.CallNode:
			if in := reshapedInput(base); inputs && in != nil {
				readers = append(readers, in)
			} else if !writes(base) {
				continue
			}
		default:
			continue
		}
		if sourceAliases(g, n, readers) {
			n.Attrs.KeepDim = false
			continue
		}
		ancestors := ancestorsOf(n)
		var late []*ir.Node // fresh-result readers the write must be ordered after
		inPlace := true
		for _, r := range readers {
			l, ok := readBefore(n, r, users, result, written, ancestors)
			inPlace = inPlace && ok
			late = append(late, l...)
		}
		if inPlace && len(late) > 0 {
			if inPlace = static && orderable(n, late, users); inPlace {
				orderAfter(g, n, late)
				reordered = true
			}
		}
		n.Attrs.KeepDim = inPlace
	}
	if reordered {
		g.SortTopological()
	}
}

// reshapedInput is the input n reshapes (an argument's elements taken
// flat), or nil.
func reshapedInput(n *ir.Node) *ir.Node {
	if n.Op != ir.OpReshape {
		return nil
	}
	if in, ok := n.Args[0].(*ir.Node); ok && in.Kind == ir.InputNode {
		return in
	}
	return nil
}

// ancestorsOf is every node n is computed from.
func ancestorsOf(n *ir.Node) map[*ir.Node]bool {
	ancestors := map[*ir.Node]bool{}
	stack := []*ir.Node{n}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, a := range v.Args {
			if an, ok := a.(*ir.Node); ok && an != nil && !ancestors[an] {
				ancestors[an] = true
				stack = append(stack, an)
			}
		}
	}
	return ancestors
}

// orderable reports whether write n can be made to follow each of late:
// none is computed from n, and each result has elements (a token).
func orderable(n *ir.Node, late []*ir.Node, users map[*ir.Node][]*ir.Node) bool {
	seen := map[*ir.Node]bool{n: true}
	stack := []*ir.Node{n}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range users[v] {
			if !seen[u] {
				seen[u] = true
				stack = append(stack, u)
			}
		}
	}
	for _, r := range late {
		if seen[r] || ir.Numel(r.Shape) == 0 {
			return false
		}
	}
	return true
}

// orderAfter makes write n's value After(value, token) for each of late,
// the token a 0-d view of its result's first element. The new nodes are
// appended to g: the caller sorts it.
func orderAfter(g *ir.Graph, n *ir.Node, late []*ir.Node) {
	k := len(n.Args) - 1 // the written value
	v := n.Args[k]
	for _, r := range late {
		flat := must1(g.Call(ir.OpReshape, ir.Attrs{Dims: []int{ir.Numel(r.Shape)}}, r.Loc, r))
		token := must1(g.Call(ir.OpAsStrided, ir.Attrs{}, r.Loc, flat))
		v = must1(g.Call(ir.OpAfter, ir.Attrs{}, n.Loc, v, token))
	}
	n.Args[k] = v
}

// must1 returns n, panicking with err (a graph the passes built wrong).
func must1(n *ir.Node, err error) *ir.Node {
	if err != nil {
		panic(err)
	}
	return n
}

// sourceAliases reports whether a value write n writes (its operands
// past the storage) may share the storage's memory: a view of it, or an
// op that may return its operand (anything but a pointwise op or a
// reduction) applied to it. Copying it in place would read elements the
// copy has already overwritten (a window shifted along its own storage).
func sourceAliases(g *ir.Graph, n *ir.Node, storage []*ir.Node) bool {
	alias := map[*ir.Node]bool{}
	for _, s := range storage {
		alias[s] = true
	}
	for _, u := range g.Nodes {
		if u == n || u.Kind != ir.CallNode || u.Op.Kind == ir.Pointwise || u.Op.Kind == ir.Reduction {
			continue
		}
		for _, a := range u.Args {
			if an, ok := a.(*ir.Node); ok && alias[an] {
				alias[u] = true
			}
		}
	}
	for _, a := range n.Args[1:] {
		if an, ok := a.(*ir.Node); ok && alias[an] {
			return true
		}
	}
	return false
}

// readBefore reports whether everything computed from base, other than
// through the write n or through an ancestor of n that some write writes
// (written) and that a pointwise op or a reduction computes, is an
// ancestor of n and no result: base's contents are then read only before
// n overwrites them, whatever the schedule. Such a written value is an
// operand of an extern op, so never fused into its other readers: they
// read its own buffer, or join the group that computes it and read base
// in that kernel, which runs before n. A view is followed through: it
// reads the storage itself. An op with a fresh result (ir.Op.Fresh) reads
// base and is done: it is not followed, and if it is no ancestor of n it
// is returned in late, to be ordered before n (markInPlace).
func readBefore(n, base *ir.Node, users map[*ir.Node][]*ir.Node, result, written, ancestors map[*ir.Node]bool) (late []*ir.Node, ok bool) {
	if result[base] {
		return nil, false
	}
	seen := map[*ir.Node]bool{}
	stack := []*ir.Node{base}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range users[v] {
			if u == n || seen[u] {
				continue
			}
			seen[u] = true
			if u.Kind == ir.CallNode && u.Op.Fresh {
				if !ancestors[u] {
					late = append(late, u)
				}
				continue
			}
			if result[u] || !ancestors[u] {
				return nil, false
			}
			if !written[u] || u.Op.Kind != ir.Pointwise && u.Op.Kind != ir.Reduction {
				stack = append(stack, u) // a view (or an op that may return one) reads the storage itself
			}
		}
	}
	return late, true
}

// aliases lists the constants of g other than c that view arr's storage
// (a captured tensor, whose storage c is).
func aliases(g *ir.Graph, c *ir.Node, arr *array.Array) []*ir.Node {
	var views []*ir.Node
	for _, n := range g.Nodes {
		if n != c && n.Kind == ir.ConstNode {
			if v, ok := n.Value.(*array.Array); ok && v.SharesStorage(arr) {
				views = append(views, n)
			}
		}
	}
	return views
}

// noArgumentWritten panics with an *Error if an argument views a tensor
// the compiled function writes: the program may write that storage in
// place while it reads the argument.
func noArgumentWritten(args []*Tensor, stores []*array.Array) {
	for _, t := range args {
		for _, s := range stores {
			if t != nil && t.v.SharesStorage(s) {
				panic(&Error{Op: "Compile", Shapes: [][]int{t.shape()},
					Reason: "an argument is a view of a tensor the compiled function writes",
					Fix:    "pass a copy (Contiguous, or Clone), or read the tensor inside the function"})
			}
		}
	}
}

// writes reports whether n is a write of a storage (a version of it).
func writes(n *ir.Node) bool {
	return n.Kind == ir.CallNode && (n.Op == ir.OpAsStridedScatter || n.Op == ir.OpAsStridedIndexCopy)
}

// flushWrites makes the graph recorded so far run (a graph break) when t
// is on a storage a traced function has written in its current segment,
// so that reading t's values directly (At, Float32s, ToDevice, …) sees the
// writes.
func flushWrites(t *Tensor, reason string) {
	tr := writerOf([]ir.Value{t})
	if tr == nil || len(tr.mut.versions) == 0 {
		return
	}
	if tr.mut.versions[t.v.StorageKey()] == nil {
		return
	}
	if tr.fullGraph {
		panic(&Error{Op: "Compile", Reason: "graph break at " + trace.Loc() + ": " + reason + " reads a tensor the function wrote",
			Fix: "read it outside the compiled function, or compute with it as a tensor"})
	}
	tr.breaks = append(tr.breaks, trace.Break{Reason: reason + " of a written tensor", Loc: trace.Loc()})
	tr.finishSegment(nil)
}

// noArgumentOn panics with an *Error if an argument views one of the
// storages keys, which the compiled function writes.
func noArgumentOn(args []*Tensor, keys []any) {
	for _, t := range args {
		if t == nil {
			continue
		}
		k := t.v.StorageKey()
		for _, w := range keys {
			if k == w {
				panic(&Error{Op: "Compile", Shapes: [][]int{t.shape()},
					Reason: "an argument is a view of a tensor the compiled function writes",
					Fix:    "pass a copy (Contiguous, or Clone), or read the tensor inside the function"})
			}
		}
	}
}

// detachAliases replaces each result that views a storage the function
// writes (a read of it folded to a constant view) by a copy, taken before
// the write-back changes the storage.
func detachAliases(outs []*Tensor, stores []*array.Array) {
	for i, t := range outs {
		for _, s := range stores {
			if t != nil && t.v.SharesStorage(s) {
				c := array.New(t.v.Device(), t.dtype(), t.shape())
				array.CopyInto(c, t.v)
				outs[i] = wrap(c)
				break
			}
		}
	}
}
