package array

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"gocompile/cuda"
	"gocompile/internal/logs"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// In ReduceOverhead mode a program on a GPU is captured once per input
// layout into a CUDA graph and replayed with one launch per call. The
// first call of a layout runs plainly (it compiles and loads the kernels);
// the second captures a plain run on the device's stream (cuda's capture
// gate keeps other goroutines' work off it meanwhile) and replays it.
//
// A replay reads the call's inputs and writes fresh outputs by giving the
// graph's kernel nodes new pointer parameters (cuda.GraphExec.
// SetKernelParams), or, with graphInputs = copyInputs, by copying the
// inputs into buffers the graph reads. Outputs are new tensors from the
// caching allocator on every call, so a later replay never overwrites the
// result of an earlier one. Intermediates live in memory the graph owns:
// every buffer allocated while it was captured, kept for its life.

// graphInputMode is how a replay reaches its inputs.
type graphInputMode int

const (
	patchInputs graphInputMode = iota // new pointer parameters for the nodes that read them
	copyInputs                        // copies into the buffers the graph was captured reading
)

// graphInputs is the input mode of new graphs. Patching measured faster on
// an H200 (bench -mlp), so it is the default;
// GOCOMPILE_CUDAGRAPH_INPUTS=copy selects copying, to measure it.
var graphInputs = func() graphInputMode {
	if os.Getenv("GOCOMPILE_CUDAGRAPH_INPUTS") == "copy" {
		return copyInputs
	}
	return patchInputs
}()

// maxGraphs is how many input layouts of one program get a graph, and
// maxLayouts how many layouts it records (the rest run plainly).
const (
	maxGraphs  = 8
	maxLayouts = 4 * maxGraphs
)

// GraphSet is a program's input layouts and their CUDA graphs: a
// program that wants its runs replayed keeps one and runs through it.
type GraphSet struct {
	mu      sync.Mutex
	layouts []*graphLayout
	graphs  int       // layouts with a graph
	full    sync.Once // logs that no more layouts are recorded
}

// graphLayout is one input layout a program was called with, and what
// became of it: run once (seen), captured (rg), or not capturable (failed).
type graphLayout struct {
	inputs []inputLayout
	rg     *replayGraph
	failed string
}

// inputLayout is what a graph depends on in one input: type, shape and
// strides, the first element's alignment (kernels choose vector access by
// it), which earlier input shares its memory (such layouts are not
// captured: a replay could not tell their addresses apart), and, when
// inputs are copied in, where in its storage it lies.
type inputLayout struct {
	dev            Device
	dtype          DType
	shape, strides []int
	align          int // first element's address mod 16
	shares         int // an earlier input with the same storage, or -1
	offset, size   int // copyInputs only
}

// matches reports whether inputs have layout l, without allocating.
func (l *graphLayout) matches(inputs []*Array) bool {
	if len(inputs) != len(l.inputs) {
		return false
	}
	for i, t := range inputs {
		in := &l.inputs[i]
		if t.st.gpu == nil || t.st.dev != in.dev || t.dtype != in.dtype || !slices.Equal(t.shape, in.shape) ||
			!slices.Equal(t.strides, in.strides) || int(t.DevicePtr()%16) != in.align || sharesWith(inputs, i) != in.shares {
			return false
		}
		if graphInputs == copyInputs && (t.offset != in.offset || t.st.gpu.block.Size != in.size) {
			return false
		}
	}
	return true
}

// sharesWith is the first input before i with input i's storage, or -1.
func sharesWith(inputs []*Array, i int) int {
	for j := range i {
		if inputs[j].st == inputs[i].st {
			return j
		}
	}
	return -1
}

// layoutOf describes inputs, if all are on a GPU.
func layoutOf(inputs []*Array) (*graphLayout, bool) {
	l := &graphLayout{}
	for i, t := range inputs {
		if t == nil || t.st.gpu == nil {
			return nil, false
		}
		in := inputLayout{dev: t.st.dev, dtype: t.dtype, shape: slices.Clone(t.shape), strides: slices.Clone(t.strides),
			align: int(t.DevicePtr() % 16), shares: sharesWith(inputs, i)}
		if graphInputs == copyInputs {
			in.offset, in.size = t.offset, t.st.gpu.block.Size
		}
		l.inputs = append(l.inputs, in)
	}
	return l, true
}

// shared reports whether some inputs of l share memory.
func (l *graphLayout) shared() bool {
	for _, in := range l.inputs {
		if in.shares >= 0 {
			return true
		}
	}
	return false
}

// String describes the layout for logs.
func (l *graphLayout) String() string {
	var b strings.Builder
	for _, in := range l.inputs {
		fmt.Fprintf(&b, "%v %v%v strides %v align %d", in.dev, in.dtype, in.shape, in.strides, in.align)
		if in.shares >= 0 {
			fmt.Fprintf(&b, " shares input %d", in.shares)
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// replayGraph is one captured program.
type replayGraph struct {
	mu      sync.Mutex // a replay sets parameters, then launches
	g       *GPU
	graph   *cuda.Graph // kept: its nodes name what SetKernelParams changes
	exec    *cuda.GraphExec
	nodes   []cuda.KernelNode
	params  [][][]byte // each node's current parameter values
	dirty   []bool
	inputs  []graphInput
	outputs []graphOutput
	results []int // output i is a view of outputs[results[i]] (-1: fixed, see fixed)
	// fixed[i] >= 0: output i is a view of input fixed[i], written in
	// place; -1 with results[i] -1: views[i] itself (a constant).
	fixed []int
	views []*Array
	inOff []int // the element offsets of the inputs the graph was captured with
	// checksIndices: its index kernels record bad indices in the fault log
	// (faults.go), which a replay arms.
	checksIndices bool
	keep          []*storage // memory the graph owns
	static        []*Array   // copyInputs: the buffers inputs are copied into
}

// paramRef is a kernel parameter holding an address: base + delta.
type paramRef struct {
	node, param int
	delta       int64
}

type graphInput struct {
	refs []paramRef // delta from the input's first element
	cur  cuda.DevicePtr
}

// graphOutput is one storage the program's outputs are views of.
type graphOutput struct {
	bytes int
	refs  []paramRef // delta from the storage's start
}

// Run runs a program on inputs as a replayed graph when it can, and
// reports whether it did. run is a plain run of the program with an arena
// of slots buffers (its buffer plan's), which Run captures on the second
// call with an input layout; the first runs plainly, in the caller.
func (gs *GraphSet) Run(inputs []*Array, slots int, run func([]*Array, *Arena) []*Array) ([]*Array, bool) {
	if len(inputs) == 0 {
		return nil, false
	}
	gs.mu.Lock()
	var l *graphLayout
	for _, c := range gs.layouts {
		if c.matches(inputs) {
			l = c
			break
		}
	}
	if l == nil { // a layout not seen before: run it plainly once
		nl, ok := layoutOf(inputs)
		recorded := ok && len(gs.layouts) < maxLayouts
		if recorded {
			gs.layouts = append(gs.layouts, nl)
		}
		gs.mu.Unlock()
		switch {
		case !ok:
		case !recorded:
			gs.full.Do(func() {
				graphLog("this program has seen as many input layouts as it records; new ones run plainly", "limit", maxLayouts)
			})
		default:
			graphLog("first call with this input layout runs plainly (it compiles the kernels); the next one is captured", "layout", nl)
		}
		return nil, false
	}
	if l.failed != "" {
		gs.mu.Unlock()
		return nil, false
	}
	rg := l.rg
	if rg == nil {
		fail := func(why string, args ...any) ([]*Array, bool) {
			l.failed = why
			gs.mu.Unlock()
			graphLog("cannot capture; running plainly", append([]any{"reason", why, "layout", l}, args...)...)
			return nil, false
		}
		if l.shared() {
			return fail("inputs share memory")
		}
		if gs.graphs >= maxGraphs {
			return fail("this program has a graph for as many input layouts as it may keep", "limit", maxGraphs)
		}
		var err error
		if rg, err = capture(inputs, slots, run); err != nil {
			return fail(err.Error())
		}
		l.rg = rg
		gs.graphs++
		graphLog("captured", "kernels", len(rg.nodes), "layout", l)
	}
	gs.mu.Unlock()
	outs, err := rg.replay(inputs)
	if err != nil {
		// Not expected; the graph is dropped and the layout runs plainly.
		gs.mu.Lock()
		if l.rg == rg {
			l.rg, l.failed = nil, err.Error()
		}
		gs.mu.Unlock()
		logs.Warn("gocompile: a CUDA graph replay failed; running this input layout with plain launches", "err", err)
		return nil, false
	}
	return outs, true
}

// graphLog logs msg under GOCOMPILE_LOGS=cudagraphs, attributed to its
// caller.
func graphLog(msg string, args ...any) {
	if logs.On("cudagraphs") {
		logs.InfoForCaller("gocompile: cudagraphs: "+msg, args...)
	}
}

// capture records a run on inputs as a graph.
func capture(inputs []*Array, slots int, run func([]*Array, *Arena) []*Array) (rg *replayGraph, err error) {
	g := inputs[0].st.gpu.g
	rg = &replayGraph{g: g}
	in := inputs
	if graphInputs == copyInputs {
		in = make([]*Array, len(inputs))
		for i, t := range inputs {
			c := newGPUArray(t.st.dev, t.dtype, []int{storageElems(t)})
			rg.static = append(rg.static, c)
			in[i] = &Array{st: c.st, shape: t.shape, strides: t.strides, offset: t.offset, dtype: t.dtype}
			Check(g.stream.CopyDtoD(c.DevicePtr(), t.st.gpu.ptr(), storageElems(t)*t.dtype.Size()), "ReduceOverhead", t)
		}
	}
	a := &Arena{slots: make([]arenaSlot, slots)}
	// Captured index kernels record bad indices in the fault log, which
	// must exist before the capture (it cannot allocate and zero memory).
	if err := g.faults.init(g); err != nil {
		return nil, err
	}
	if err := g.stream.BeginCapture(); err != nil {
		return nil, err
	}
	g.captured.Store(&rg.keep)
	reserved := g.faults.used()
	var outs []*Array
	func() {
		defer func() {
			if e := recover(); e != nil {
				err = fmt.Errorf("the run panicked while captured: %v", e)
			}
		}()
		outs = run(in, a)
	}()
	g.captured.Store(nil)
	rg.checksIndices = g.faults.used() > reserved
	graph, endErr := g.stream.EndCapture()
	if err == nil && endErr != nil {
		err = fmt.Errorf("capture failed (the program waits for the device, or uses an op that cannot be captured): %w", endErr)
	}
	if err != nil {
		if graph != nil {
			graph.Destroy()
		}
		return nil, err
	}
	rg.graph = graph
	made := rg // the returns below set rg to nil when they fail
	defer func() {
		if err != nil {
			made.destroy()
		}
	}()
	nodes, others, err := graph.KernelNodes()
	if err != nil {
		return nil, err
	}
	for _, k := range nodes {
		if _, ok := g.generated.Load(k.Func()); !ok {
			return nil, fmt.Errorf("the program runs a library kernel (cuBLAS, cuBLASLt), whose arguments a replay cannot redirect")
		}
	}
	if others > 0 {
		return nil, fmt.Errorf("the program copies or sets memory outside kernels (%d such steps)", others)
	}
	rg.nodes = nodes
	for _, k := range nodes {
		ps := make([][]byte, len(k.Params))
		for j, p := range k.Params {
			ps[j] = append([]byte(nil), p...)
		}
		rg.params = append(rg.params, ps)
	}
	rg.dirty = make([]bool, len(nodes))
	// refs finds the address parameters that point into [lo, lo+n).
	refs := func(lo cuda.DevicePtr, n int, from cuda.DevicePtr) []paramRef {
		var rs []paramRef
		for i := range rg.nodes {
			for j := range rg.nodes[i].Params {
				if v, ok := rg.nodes[i].Pointer(j); ok && v >= lo && v < lo+cuda.DevicePtr(n) {
					rs = append(rs, paramRef{i, j, int64(v) - int64(from)})
				}
			}
		}
		return rs
	}
	if graphInputs == patchInputs {
		for _, t := range in {
			rg.inputs = append(rg.inputs, graphInput{
				refs: refs(t.st.gpu.ptr(), t.st.gpu.block.Size, t.DevicePtr()), cur: t.DevicePtr()})
		}
	}
	for _, t := range in {
		rg.inOff = append(rg.inOff, t.offset)
	}
	owned := map[*storage]bool{}
	for _, st := range rg.keep {
		owned[st] = true
	}
	byStorage := map[*storage]int{}
	for i, o := range outs {
		if o == nil || o.st.gpu == nil {
			return nil, fmt.Errorf("output %d is not on the GPU", i)
		}
		if !owned[o.st] {
			// An input or a constant the program returns, or wrote in
			// place (a KV cache): each replay returns it, written again.
			j := slices.IndexFunc(in, func(t *Array) bool { return t.st == o.st })
			if j >= 0 && graphInputs == copyInputs {
				return nil, fmt.Errorf("output %d is an input, which a replay reads through a copy", i)
			}
			rg.results = append(rg.results, -1)
			rg.fixed = append(rg.fixed, j)
			rg.views = append(rg.views, o)
			continue
		}
		j, ok := byStorage[o.st]
		if !ok {
			j = len(rg.outputs)
			byStorage[o.st] = j
			b := o.st.gpu.block
			rs := refs(b.Ptr, b.Size, b.Ptr)
			if len(rs) == 0 {
				return nil, fmt.Errorf("no kernel writes output %d", i)
			}
			rg.outputs = append(rg.outputs, graphOutput{bytes: b.Size, refs: rs})
		}
		rg.results = append(rg.results, j)
		rg.fixed = append(rg.fixed, -1)
		rg.views = append(rg.views, o)
	}
	if rg.exec, err = graph.Instantiate(); err != nil {
		return nil, err
	}
	return rg, nil
}

// destroy releases the graph's driver objects (its memory goes with rg).
func (rg *replayGraph) destroy() {
	if rg.exec != nil {
		rg.exec.Destroy()
	}
	rg.graph.Destroy()
}

// storageElems is how many elements of t's type its storage holds.
func storageElems(t *Array) int { return t.st.gpu.block.Size / t.dtype.Size() }

// replay runs the graph for inputs and returns fresh outputs.
func (rg *replayGraph) replay(inputs []*Array) ([]*Array, error) {
	g := rg.g
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if graphInputs == copyInputs && rg.static != nil {
		for i, t := range inputs {
			if err := g.stream.CopyDtoD(rg.static[i].DevicePtr(), t.st.gpu.ptr(), storageElems(t)*t.dtype.Size()); err != nil {
				return nil, err
			}
		}
	}
	for i := range rg.inputs {
		in := &rg.inputs[i]
		if p := inputs[i].DevicePtr(); p != in.cur {
			in.cur = p
			rg.patch(in.refs, p)
		}
	}
	fresh := make([]*Array, len(rg.outputs))
	for j, o := range rg.outputs {
		fresh[j] = newGPUArray(rg.views[0].st.dev, ir.Bool, []int{o.bytes})
		rg.patch(o.refs, fresh[j].st.gpu.ptr())
	}
	for i := range rg.nodes {
		if rg.dirty[i] {
			if err := rg.exec.SetKernelParams(&rg.nodes[i], rg.params[i]); err != nil {
				return nil, err
			}
			rg.dirty[i] = false
		}
	}
	if err := rg.exec.Launch(g.stream); err != nil {
		return nil, err
	}
	if rg.checksIndices {
		g.faults.armed.Store(true)
	}
	stats.GraphReplays.Add(1)
	outs := make([]*Array, len(rg.views))
	for i, v := range rg.views {
		switch j := rg.fixed[i]; {
		case rg.results[i] >= 0:
			outs[i] = &Array{st: fresh[rg.results[i]].st, shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype}
		case j >= 0: // the same place in this call's input
			outs[i] = &Array{st: inputs[j].st, shape: v.shape, strides: v.strides, offset: v.offset - rg.inOff[j] + inputs[j].offset, dtype: v.dtype}
		default:
			outs[i] = v
		}
	}
	return outs, nil
}

// patch points the parameters refs at base (plus each one's delta).
func (rg *replayGraph) patch(refs []paramRef, base cuda.DevicePtr) {
	for _, r := range refs {
		binary.LittleEndian.PutUint64(rg.params[r.node][r.param], uint64(int64(base)+r.delta))
		rg.dirty[r.node] = true
	}
}
