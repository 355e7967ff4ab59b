package array

import (
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"gocompile/cuda"
)

// A program's first run on a GPU meets each of its kernels for the first
// time. Rather than compile them one after another as the steps reach
// them, the run queues its launches: each step starts compiling its
// kernel (in parallel, up to one compile per CPU) and leaves its launch in
// the queue, which launches in program order once each kernel is ready
// (Drain). Steps that launch by other means (eager ops, autotuning) drain
// the queue first, so the stream sees every launch in program order. The
// queue holds the tensors its launches use, so no memory they use is
// freed and reused before they are queued on the stream.
type LaunchQueue struct {
	eg    errgroup.Group
	items []queuedLaunch
	keep  []*Array
}

type queuedLaunch struct {
	k      *pendingKernel
	launch func(fn *cuda.Function)
}

// pendingKernel is a kernel being loaded or compiled.
type pendingKernel struct {
	name string
	done chan struct{}
	fn   *cuda.Function
	err  any // what loading panicked with
}

// NewLaunchQueue is an empty queue for one run.
func NewLaunchQueue() *LaunchQueue {
	q := &LaunchQueue{}
	q.eg.SetLimit(runtime.NumCPU())
	return q
}

// kernel starts getting the named kernel for g (as g.KernelIn would).
func (q *LaunchQueue) kernel(g *GPU, c *Artifacts, name string, gen func() (string, error)) *pendingKernel {
	k := &pendingKernel{name: name, done: make(chan struct{})}
	q.eg.Go(func() error {
		defer close(k.done)
		defer func() { k.err = recover() }()
		k.fn = g.KernelIn(c, name, gen)
		return nil
	})
	return k
}

// add queues launch of k, keeping the tensors it uses alive.
func (q *LaunchQueue) add(k *pendingKernel, launch func(fn *cuda.Function), uses ...*Array) {
	q.items = append(q.items, queuedLaunch{k, launch})
	q.keep = append(q.keep, uses...)
}

// Drain launches everything queued, in order. A kernel that failed to
// build panics as GPU.KernelIn does.
func (q *LaunchQueue) Drain() {
	if q == nil {
		return
	}
	items := q.items
	q.items, q.keep = nil, nil
	for _, it := range items {
		<-it.k.done
		if it.k.err != nil {
			if ke, ok := it.k.err.(*KernelError); ok {
				panic(ke)
			}
			panic(fmt.Sprintf("array: loading kernel %s: %v", it.k.name, it.k.err))
		}
		it.launch(it.k.fn)
	}
}

// Args returns the argument list of a launch on g: from g's pool when the
// launch happens now (q nil; give it back with release), a new one when it
// is queued (the queued launch keeps it).
func (q *LaunchQueue) Args(g *GPU) *cuda.Args {
	if q == nil {
		return g.GetArgs()
	}
	return cuda.NewArgs()
}

// Release gives back an argument list from Args once the launch is made.
func (q *LaunchQueue) Release(g *GPU, a *cuda.Args) {
	if q == nil {
		g.PutArgs(a)
	}
}

// KernelOrQueue returns the named kernel now (q nil), or queues launch
// with it (q not nil); launch must not use pooled arguments then.
func KernelOrQueue(q *LaunchQueue, g *GPU, c *Artifacts, name string, gen func() (string, error), launch func(fn *cuda.Function), uses ...*Array) {
	if q == nil {
		launch(g.KernelIn(c, name, gen))
		return
	}
	q.add(q.kernel(g, c, name, gen), launch, uses...)
}
