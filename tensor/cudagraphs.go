package tensor

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"gocompile/cuda"
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

// graphReplays counts graph launches in this process.
var graphReplays atomic.Int64

// maxGraphs is how many input layouts of one program get a graph.
const maxGraphs = 8

// graphSet is a program's captured graphs, by input layout.
type graphSet struct {
	mu     sync.Mutex
	graphs map[string]*replayGraph
	seen   map[string]bool   // layouts run once (warmed up)
	failed map[string]string // layouts that cannot be captured, and why
}

// replayGraph is one captured program.
type replayGraph struct {
	mu      sync.Mutex // a replay sets parameters, then launches
	g       *gpu
	graph   *cuda.Graph // kept: its nodes name what SetKernelParams changes
	exec    *cuda.GraphExec
	nodes   []cuda.KernelNode
	params  [][][]byte // each node's current parameter values
	dirty   []bool
	inputs  []graphInput
	outputs []graphOutput
	results []int // output i is view results[i] of outputs[...]: see views
	views   []*Tensor
	keep    []*storage // memory the graph owns
	static  []*Tensor  // copyInputs: the buffers inputs are copied into
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

// layoutKey names what a graph depends on in its inputs: types, shapes,
// strides, whether each first element is 16-byte aligned (kernels choose
// vector access by it), and which inputs share memory (such layouts are
// not captured: a replay could not tell their addresses apart).
func layoutKey(inputs []*Tensor) (key string, shared, ok bool) {
	var b strings.Builder
	for i, t := range inputs {
		if t == nil || t.st.gpu == nil {
			return "", false, false
		}
		fmt.Fprintf(&b, "%v%v%v%v%d", t.st.dev, t.dtype, t.shape, t.strides, t.devicePtr()%16)
		if graphInputs == copyInputs { // the whole storage is copied to the same place
			fmt.Fprintf(&b, "@%d/%d", t.offset, t.st.gpu.block.Size)
		}
		for j := range i {
			if inputs[j].st == t.st {
				fmt.Fprintf(&b, "=%d", j)
				shared = true
				break
			}
		}
		b.WriteByte('|')
	}
	return b.String(), shared, true
}

// runGraph runs p for inputs as a replayed graph when it can, reporting
// whether it did.
func (p *inductorProgram) runGraph(inputs []*Tensor) ([]*Tensor, bool) {
	key, shared, ok := layoutKey(inputs)
	if !ok || len(inputs) == 0 {
		return nil, false
	}
	gs := &p.graphs
	gs.mu.Lock()
	rg := gs.graphs[key]
	if rg == nil {
		if _, failed := gs.failed[key]; failed {
			gs.mu.Unlock()
			return nil, false
		}
		if !gs.seen[key] {
			if gs.seen == nil {
				gs.seen, gs.failed, gs.graphs = map[string]bool{}, map[string]string{}, map[string]*replayGraph{}
			}
			gs.seen[key] = true
			gs.mu.Unlock()
			graphLog("first call with this input layout runs plainly (it compiles the kernels); the next one is captured", "layout", key)
			return nil, false
		}
		if shared {
			gs.failed[key] = "inputs share memory"
			gs.mu.Unlock()
			graphLog("cannot capture: inputs share memory; running plainly", "layout", key)
			return nil, false
		}
		if len(gs.graphs) >= maxGraphs {
			gs.failed[key] = "graph limit reached"
			gs.mu.Unlock()
			graphLog("this program has a graph for as many input layouts as it may keep; running plainly", "limit", maxGraphs, "layout", key)
			return nil, false
		}
		var err error
		rg, err = p.capture(inputs)
		if err != nil {
			gs.failed[key] = err.Error()
			gs.mu.Unlock()
			graphLog("cannot capture; running plainly", "reason", err.Error(), "layout", key)
			return nil, false
		}
		gs.graphs[key] = rg
		graphLog("captured", "kernels", len(rg.nodes), "layout", key)
	}
	gs.mu.Unlock()
	outs, err := rg.replay(inputs)
	if err != nil {
		// Not expected; the graph is dropped and the layout runs plainly.
		gs.mu.Lock()
		if gs.graphs[key] == rg {
			delete(gs.graphs, key)
			gs.failed[key] = err.Error()
		}
		gs.mu.Unlock()
		slog.Warn("gocompile: a CUDA graph replay failed; running this input layout with plain launches", "err", err)
		return nil, false
	}
	return outs, true
}

func graphLog(msg string, args ...any) {
	if logOn("cudagraphs") {
		slog.Info("gocompile: cudagraphs: "+msg, args...)
	}
}

// capture records a run of p on inputs as a graph.
func (p *inductorProgram) capture(inputs []*Tensor) (rg *replayGraph, err error) {
	g := inputs[0].st.gpu.g
	rg = &replayGraph{g: g}
	run := inputs
	if graphInputs == copyInputs {
		run = make([]*Tensor, len(inputs))
		for i, t := range inputs {
			c := newGPUTensor(t.st.dev, t.dtype, []int{storageElems(t)})
			rg.static = append(rg.static, c)
			run[i] = &Tensor{st: c.st, shape: t.shape, strides: t.strides, offset: t.offset, dtype: t.dtype}
			check(g.stream.CopyDtoD(c.devicePtr(), t.st.gpu.ptr(), storageElems(t)*t.dtype.Size()), "ReduceOverhead", t)
		}
	}
	a := &arena{slots: make([]arenaSlot, len(p.plan.SlotBytes))}
	if err := g.stream.BeginCapture(); err != nil {
		return nil, err
	}
	g.captured.Store(&rg.keep)
	var outs []*Tensor
	func() {
		defer func() {
			if e := recover(); e != nil {
				err = fmt.Errorf("the run panicked while captured: %v", e)
			}
		}()
		outs = p.runWith(run, a, nil)
	}()
	g.captured.Store(nil)
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
		for _, t := range run {
			rg.inputs = append(rg.inputs, graphInput{
				refs: refs(t.st.gpu.ptr(), t.st.gpu.block.Size, t.devicePtr()), cur: t.devicePtr()})
		}
	}
	owned := map[*storage]bool{}
	for _, st := range rg.keep {
		owned[st] = true
	}
	byStorage := map[*storage]int{}
	for i, o := range outs {
		if o == nil || o.st.gpu == nil || !owned[o.st] {
			return nil, fmt.Errorf("output %d is not computed by the program (an input, a constant, or on the CPU)", i)
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
func storageElems(t *Tensor) int { return t.st.gpu.block.Size / t.dtype.Size() }

// replay runs the graph for inputs and returns fresh outputs.
func (rg *replayGraph) replay(inputs []*Tensor) ([]*Tensor, error) {
	g := rg.g
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if graphInputs == copyInputs && rg.static != nil {
		for i, t := range inputs {
			if err := g.stream.CopyDtoD(rg.static[i].devicePtr(), t.st.gpu.ptr(), storageElems(t)*t.dtype.Size()); err != nil {
				return nil, err
			}
		}
	}
	for i := range rg.inputs {
		in := &rg.inputs[i]
		if p := inputs[i].devicePtr(); p != in.cur {
			in.cur = p
			rg.patch(in.refs, p)
		}
	}
	fresh := make([]*Tensor, len(rg.outputs))
	for j, o := range rg.outputs {
		fresh[j] = newGPUTensor(rg.views[0].st.dev, Bool, []int{o.bytes})
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
	graphReplays.Add(1)
	outs := make([]*Tensor, len(rg.views))
	for i, v := range rg.views {
		outs[i] = &Tensor{st: fresh[rg.results[i]].st, shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype}
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
