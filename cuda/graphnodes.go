package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// A captured graph's kernel launches can be read back and, in its
// executable graph, given new parameter values: how a replayed graph reads
// this call's inputs and writes fresh outputs without being captured
// again.

// KernelNode is one kernel launch node of a graph, with a copy of its
// parameter values as captured.
type KernelNode struct {
	h      uintptr // CUgraphNode
	params kernelNodeParams
	ptrs   []unsafe.Pointer // SetKernelParams' argument array, reused
	// Params holds each kernel parameter's bytes, in order.
	Params [][]byte
}

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2.
type kernelNodeParams struct {
	fn                     uintptr
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedMem              uint32
	_                      uint32
	kernelParams           unsafe.Pointer // void**, in the driver's memory (or, to set, ours)
	extra                  uintptr        // void**
	kern                   uintptr        // CUkernel
	ctx                    uintptr        // CUcontext
}

// CUgraphNodeType values.
const nodeTypeKernel = 0

// KernelNodes returns the graph's kernel nodes, and how many nodes of
// other kinds (copies, memsets) it has.
func (g *Graph) KernelNodes() (nodes []KernelNode, others int, err error) {
	var n uintptr
	if err := g.dev.call("cuGraphGetNodes", drv.cuGraphGetNodes, g.h, 0, uintptr(unsafe.Pointer(&n)), 0); err != nil {
		return nil, 0, err
	}
	if n == 0 {
		return nil, 0, nil
	}
	hs := make([]uintptr, n)
	if err := g.dev.call("cuGraphGetNodes", drv.cuGraphGetNodes, g.h, uintptr(unsafe.Pointer(&hs[0])), uintptr(unsafe.Pointer(&n)), 0); err != nil {
		return nil, 0, err
	}
	for _, h := range hs[:n] {
		var typ int32
		if err := g.dev.call("cuGraphNodeGetType", drv.cuGraphNodeGetType, h, uintptr(unsafe.Pointer(&typ)), 0, 0); err != nil {
			return nil, 0, err
		}
		if typ != nodeTypeKernel {
			others++
			continue
		}
		k := KernelNode{h: h}
		if err := g.dev.call("cuGraphKernelNodeGetParams_v2", drv.cuGraphKernelNodeGetParams, h, uintptr(unsafe.Pointer(&k.params)), 0, 0); err != nil {
			return nil, 0, err
		}
		if k.params.fn == 0 {
			return nil, 0, fmt.Errorf("cuda: a kernel node has no function handle (a library kernel), so its parameters cannot be read")
		}
		if k.params.kernelParams == nil {
			return nil, 0, fmt.Errorf("cuda: a kernel node passes its parameters as extra, which cannot be read back")
		}
		ptrs := unsafe.Slice((*unsafe.Pointer)(k.params.kernelParams), 64)
		for i := 0; ; i++ {
			var off, size uintptr
			if err := g.dev.call("cuFuncGetParamInfo", drv.cuFuncGetParamInfo, k.params.fn, uintptr(i),
				uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size))); err != nil {
				if i == 0 {
					return nil, 0, fmt.Errorf("cuda: reading a kernel node's parameters: %w", err)
				}
				break // past the last parameter
			}
			if i >= len(ptrs) {
				return nil, 0, fmt.Errorf("cuda: a kernel node has more than %d parameters", len(ptrs))
			}
			k.Params = append(k.Params, append([]byte(nil), unsafe.Slice((*byte)(ptrs[i]), size)...))
		}
		nodes = append(nodes, k)
	}
	return nodes, others, nil
}

// Func is the node's CUfunction (as Function.Handle gives).
func (k *KernelNode) Func() uintptr { return k.params.fn }

// Pointer reads parameter i of k as a device address; ok is false when it
// is not 8 bytes.
func (k *KernelNode) Pointer(i int) (DevicePtr, bool) {
	if len(k.Params[i]) != 8 {
		return 0, false
	}
	return DevicePtr(*(*uint64)(unsafe.Pointer(&k.Params[i][0]))), true
}

// SetKernelParams gives node k of e the parameter values params (one per
// kernel parameter, each of its captured size), for the launches of e
// from now on (cuGraphExecKernelNodeSetParams_v2). k must come from the
// graph e was instantiated from. Calls for one node must not overlap.
func (e *GraphExec) SetKernelParams(k *KernelNode, params [][]byte) error {
	if len(params) != len(k.Params) {
		return fmt.Errorf("cuda: SetKernelParams: %d parameters, the kernel takes %d", len(params), len(k.Params))
	}
	if len(k.ptrs) != len(params)+1 {
		k.ptrs = make([]unsafe.Pointer, len(params)+1)
	}
	ptrs := k.ptrs
	for i, p := range params {
		if len(p) != len(k.Params[i]) {
			return fmt.Errorf("cuda: SetKernelParams: parameter %d has %d bytes, want %d", i, len(p), len(k.Params[i]))
		}
		ptrs[i] = unsafe.Pointer(&p[0])
	}
	np := k.params
	np.kernelParams = unsafe.Pointer(&ptrs[0])
	err := e.dev.call("cuGraphExecKernelNodeSetParams_v2", drv.cuGraphExecKernelNodeSetParams, e.h, k.h, uintptr(unsafe.Pointer(&np)), 0)
	runtime.KeepAlive(ptrs)
	runtime.KeepAlive(params)
	return err
}
