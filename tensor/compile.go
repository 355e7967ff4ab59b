package tensor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"gocompile/array"
	"gocompile/guard"
	"gocompile/inductor/program"
	"gocompile/internal/logs"
	"gocompile/ir"
	"gocompile/kcache"
	"gocompile/trace"
)

// Mode selects how hard Compile works for speed, as torch.compile's mode
// argument does. Pass one to WithMode:
//
//   - Default: plain kernel launches; compiles quickly.
//   - ReduceOverhead: each program replayed on a GPU as one CUDA graph.
//   - MaxAutotune: launch shapes and library algorithms timed on the
//     device, the fastest kept in the artifact cache.
type Mode int

const (
	// Default balances compile time and speed.
	Default Mode = iota
	// ReduceOverhead replays whole programs on a GPU as CUDA graphs, one
	// launch per call, to save launch overhead at small batch sizes: each
	// input layout is captured on its second call (the first runs plainly
	// and compiles the kernels). Every call returns new output tensors,
	// and the writes of tensors the function captures or takes as
	// arguments reach them after every replay.
	// Programs that cannot be captured (they wait for the device, or run
	// library kernels such as cuBLAS's for products of more than 64 rows)
	// run plainly, with the reason under GOCOMPILE_LOGS=cudagraphs. On the
	// CPU it is Default.
	ReduceOverhead
	// MaxAutotune times candidate launch shapes of generated kernels
	// (GEMM, fused pointwise, row) and cuBLASLt's ranked algorithms for
	// larger float32 products on the device, and keeps the fastest,
	// remembered in the artifact cache so each device searches once per
	// kernel and shape.
	MaxAutotune
)

func (m Mode) String() string {
	names := [...]string{"default", "reduce-overhead", "max-autotune"}
	if m >= 0 && int(m) < len(names) {
		return names[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Option configures Compile.
type Option func(*options)

type options struct {
	mode      Mode
	backend   string
	fullGraph bool
	dynamic   *bool
	limit     int
	cacheDir  string
	stats     *CompileStats
	// dynScalars are the argument positions whose numbers are dynamic.
	dynScalars map[int]bool
}

// WithMode selects the compilation mode.
func WithMode(m Mode) Option { return func(o *options) { o.mode = m } }

// WithBackend selects a registered backend by name: "inductor" (the
// default) runs each fusion region (pointwise chains, reductions over the
// last dim with their prologue and epilogue) as one generated kernel;
// "eager" runs captured graphs op by op with the eager kernels, which
// tells capture problems from code generation problems; RegisterBackend
// adds others.
func WithBackend(name string) Option { return func(o *options) { o.backend = name } }

// FullGraph makes every graph break an error naming its reason and
// file:line, instead of compiling the function in segments.
func FullGraph() Option { return func(o *options) { o.fullGraph = true } }

// Dynamic(true) compiles every dim as dynamic from the first call;
// Dynamic(false) never makes dims dynamic (every new size recompiles). By
// default a dim becomes dynamic when a call misses only because it changed.
func Dynamic(on bool) Option { return func(o *options) { o.dynamic = &on } }

// DynamicScalars passes the numbers in the given arguments (by parameter
// position) to the compiled graph on every call instead of guarding them
// by value, so a new learning rate or scale does not recompile. fn must not
// branch on them: Compile checks, by tracing at two values, that each such
// number reaches the graph unchanged, and guards it by value (with a log
// line under GOCOMPILE_LOGS=recompiles) when it does not. Whether a number
// is integral stays guarded, as it decides type promotion.
func DynamicScalars(args ...int) Option {
	return func(o *options) {
		if o.dynScalars == nil {
			o.dynScalars = map[int]bool{}
		}
		for _, a := range args {
			o.dynScalars[a] = true
		}
	}
}

// RecompileLimit sets how many compiled entries (one per set of guards) a
// function may keep; a call that would need another runs eagerly from then
// on, with one warning (default 8, as torch's cache_size_limit).
func RecompileLimit(n int) Option { return func(o *options) { o.limit = n } }

// WithCacheDir sets the directory that keeps the function's compiled
// artifacts (its fusion layouts and generated kernels) across processes,
// instead of GOCOMPILE_CACHE_DIR or, without it, the user cache directory
// (os.UserCacheDir()/gocompile). Kernels already loaded in the process are
// shared by all functions whichever directory they came from.
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// backendConfig is what the options tell a backend beyond the graph.
type backendConfig struct {
	mode      Mode
	artifacts *array.Artifacts // where compiled artifacts are kept
}

// configurable is a backend that follows the options (the built-in ones).
type configurable interface {
	compileWith(g *ir.Graph, cfg backendConfig) (Program, error)
}

// inductorBackend is the "inductor" backend: package inductor/program
// runs each graph as fusion regions, each one generated kernel.
type inductorBackend struct{}

func (b inductorBackend) Compile(g *ir.Graph) (Program, error) {
	return b.compileWith(g, backendConfig{})
}

func (inductorBackend) compileWith(g *ir.Graph, cfg backendConfig) (Program, error) {
	p, err := program.Compile(g, program.Config{
		Artifacts:  cfg.artifacts,
		CUDAGraphs: cfg.mode == ReduceOverhead,
		Autotune:   cfg.mode == MaxAutotune,
	})
	if err != nil {
		return nil, err
	}
	return arrayProgram{p}, nil
}

// caches holds the cache of each WithCacheDir directory, opened once.
var caches sync.Map // dir → *kcache.Cache

// cacheFor is the artifact cache for dir ("": the default one).
func cacheFor(dir string) *kcache.Cache {
	if dir == "" {
		return array.ArtifactCache()
	}
	if c, ok := caches.Load(dir); ok {
		return c.(*kcache.Cache)
	}
	c, _ := caches.LoadOrStore(dir, kcache.Open(dir, kcache.WithLogger(logs.CacheLogger)))
	return c.(*kcache.Cache)
}

// MarkDynamic asks Compile to treat dims of t as dynamic from the first
// compile of any function t is passed to, and returns t.
func MarkDynamic(t *Tensor, dims ...int) *Tensor {
	t.must("MarkDynamic")
	for _, d := range dims {
		n := t.normDim("MarkDynamic", d)
		if n >= 64 {
			throw("MarkDynamic", []*Tensor{t}, "mark dims below 64, or reshape the tensor to fewer dims",
				"dim %d cannot be marked: only the first 64 dims can be dynamic", d)
		}
		t.dynDims |= 1 << uint(n)
	}
	return t
}

// Program runs a compiled graph: it takes the values of the graph's inputs
// and returns the values of its outputs.
type Program interface {
	Run(inputs []*Tensor) []*Tensor
}

// Backend turns a captured graph into a Program.
type Backend interface {
	Compile(g *ir.Graph) (Program, error)
}

// BackendFunc adapts a function to Backend.
type BackendFunc func(g *ir.Graph) (Program, error)

// Compile calls f.
func (f BackendFunc) Compile(g *ir.Graph) (Program, error) { return f(g) }

var backends sync.Map // name → Backend

// RegisterBackend makes b available to WithBackend(name).
func RegisterBackend(name string, b Backend) {
	if b == nil {
		throw("RegisterBackend", nil, "pass a Backend", "backend %q is nil", name)
	}
	if f, ok := b.(BackendFunc); ok && f == nil {
		throw("RegisterBackend", nil, "pass a Backend", "backend %q is a nil BackendFunc", name)
	}
	backends.Store(name, b)
}

// LookupBackend returns the backend registered under name ("inductor",
// "eager" or one of RegisterBackend's), so a custom backend can hand a
// graph, or part of the work, to a built-in one.
func LookupBackend(name string) (Backend, bool) {
	b, ok := backends.Load(name)
	if !ok {
		return nil, false
	}
	return b.(Backend), true
}

func init() {
	RegisterBackend("eager", BackendFunc(func(g *ir.Graph) (Program, error) { return newEagerProgram(g), nil }))
	RegisterBackend("inductor", inductorBackend{})
}

// defaultBackend is used when no WithBackend option is given.
const defaultBackend = "inductor"

// Compile returns a function of the same type as fn that runs fn as a
// compiled graph. The first call with given argument shapes, dtypes,
// devices and scalar values traces fn on proxy tensors, records a graph
// of its ops, installs guards, and compiles the graph; later calls whose
// arguments pass the guards replay the compiled program without running
// fn at all. Arguments and results may be *Tensor, slices and arrays of
// them, structs (or pointers to structs) holding them, and numbers, which
// are guarded by value, as are the lengths of slices (a variadic fn's
// arguments among them) and which pointers are nil; Compile panics with
// an *Error if fn's signature has another type. Tensors fn reaches that
// are not arguments (weights in a closure) become constants bound by
// reference: updating one in place is seen by later calls. Ops whose
// operands are all such constants run once, while tracing, as in JAX;
// their results are constants too.
//
// fn may write traced values into such tensors, or views of them
// (cache.Narrow(1, pos, 1).Copy(k), a KV cache), with Copy, Fill, Set,
// IndexCopyInPlace or IndexPutInPlace: the write is part of the graph, as
// a new version of the tensor's storage that later reads in fn see, and
// each call copies the last version into the storage once its program has
// run (torch.compile's functionalization); where nothing else reads the
// old contents the write updates the storage in place. Such a tensor's
// reads inside fn are then graph ops on every call, not constants;
// reading its values (At, Float32s, …) after a write is a graph break.
// Arguments cannot be passed as views of a tensor fn writes. A write whose
// value involves no argument, made before the first write of an
// argument-derived value to the same tensor, runs once more on the first
// call (while tracing). A function that writes a tensor must not run
// concurrently with other code that uses that tensor, this function's
// other calls included.
//
// fn may write its arguments the same way, or views of them
// (x.Narrow(0, 1, 2).Copy(y), a cache passed in): every later read in fn
// of the argument, through any view of it taken before the write or
// after, sees the write, and when each call's program has run (a CUDA
// graph's replay included) the caller's tensor holds the written values;
// only its own elements change, not the rest of a tensor it is a view of.
// A written argument's dims are compiled static. A result that is the
// written argument itself is the caller's tensor, as eagerly; a result
// that is another view of it is a new tensor holding the values the call
// wrote (eagerly it would be a view, changed by later writes). Without
// graph breaks, calls after the first write the argument in place where
// nothing else in fn reads its old contents; otherwise the program writes
// a copy, which the call copies back. A call panics with an *Error if a
// written argument shares memory with another argument or with a tensor
// fn captures (pass a Clone), or repeats elements (an Expand view);
// writing an argument that requires gradients is an error outside NoGrad,
// as it is eagerly. Calls writing different arguments may run
// concurrently. Tensors fn computes cannot be written in place: compute
// new ones (Where, IndexPut, Cat …).
//
// Reading a traced tensor's values inside fn (Item, Float32s, String, …)
// breaks the graph: the ops so far run, the read gets real values, and
// tracing goes on in a new segment. Such a function re-runs fn on every
// call, each segment replaying from a cache. FullGraph turns breaks into
// errors. With GOCOMPILE_DISABLE=1, Compile returns fn itself.
//
// The returned function is safe for concurrent use; concurrent first calls
// with the same guards trace and compile once.
func Compile[F any](fn F, opts ...Option) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func {
		panic(&Error{Op: "Compile", Reason: fmt.Sprintf("%T is not a function", fn), Fix: "pass a func"})
	}
	if v.IsNil() {
		throw("Compile", nil, "pass a func", "the %T is nil", fn)
	}
	checkSignature("Compile", v.Type())
	if os.Getenv("GOCOMPILE_DISABLE") == "1" {
		return fn
	}
	c := newCompiled(v, opts)
	return reflect.MakeFunc(v.Type(), c.call).Interface().(F)
}

// compiled is the state of one compiled function.
type compiled struct {
	fn        reflect.Value
	opts      options
	backend   Backend
	guards    atomic.Pointer[guard.Cache] // made by the first call
	flight    singleflight.Group
	compileMu sync.Mutex
	segments  sync.Map // graph key → *segmentEntry
	eager     atomic.Bool
	// staticScalars is set when DynamicScalars could not be honoured: the
	// numbers are guarded by value from then on.
	staticScalars atomic.Bool
	warned        sync.Once
	gradWarned    sync.Once // the warning that gradients make fn run eagerly
	name          string
	// isGrad marks a twin that traces gradients (compilegrad.go); twins
	// holds them by which arguments require gradients, and capturesGrad
	// says fn reads a captured tensor that requires them.
	isGrad       bool
	twins        sync.Map // mask → *compiled
	capturesGrad atomic.Bool
	// A twin's base is the function it serves; viaResult (k+1) says fn's
	// result k requires gradients without Backward inside, and bwd is
	// then its compiled backward (compilegrad.go).
	base      *compiled
	viaResult atomic.Int64
	bwdOnce   sync.Once
	bwd       *compiled
	// parts holds, behind static guards on the call, the forward and
	// backward halves of the joint graph (*partSlot); partsMu serialises
	// its inserts.
	parts   atomic.Pointer[guard.Cache]
	partsMu sync.Mutex
	// consts maps the arrays of the tensors its graphs bind as constants
	// back to those tensors (resultSources).
	consts sync.Map // *array.Array → *Tensor
	// held lists the leaves whose gradients at call time the traced
	// function reads (compilegrad.go), and scalars the ScalarFuncs it
	// reads: each call binds them as inputs after its arguments' tensors.
	// heldMu serialises their growth.
	held    atomic.Pointer[[]gradTarget]
	scalars atomic.Pointer[[]scalarSource]
	heldMu  sync.Mutex
	// stale counts entries compiled again because a Guard condition of
	// theirs failed.
	stale atomic.Int64
}

type segmentEntry struct {
	once    sync.Once
	prog    Program
	sources []resultSource // per output: an input or constant returned as is
}

// entry is what one guard entry serves.
type entry struct {
	breaks   []trace.Break
	graphs   []*ir.Graph
	prog     Program         // without breaks: the whole function
	template []reflect.Value // fn's results with proxies, rebuilt on replay
	// firstResults are the results of the call that compiled an entry with
	// graph breaks (fn ran while tracing); only that call uses them.
	firstResults []reflect.Value
	ninputs      int
	sources      []resultSource // per output: an input or constant returned as is
	// Tensors fn writes (mutation.go): without breaks, the outputs past
	// nresults are the last versions of stores; with breaks, written
	// lists the storages each run binds as written.
	nresults int
	stores   []*array.Array
	written  []any
	// argWrites are the arguments fn writes, whose last versions follow
	// the stores' among the outputs; resultArgs says which results are
	// such an argument itself (giveArgs), and constKeys are the storages
	// the graph reads by reference, which a written argument must not
	// share.
	argWrites  []argWrite
	resultArgs []int
	constKeys  map[any]bool
	// grads are where the outputs past the stores' versions go: the
	// gradients of leaves the run computed, set or cleared
	// (compilegrad.go).
	grads []gradTarget
	// checks are the conditions code traced for the entry asked to hold
	// (Guard): when one fails the entry is compiled again.
	checks []guardCheck
	// leafUses are the tensors the trace reached leaves' gradients
	// through, and leafClasses which of them were the same tensor, where
	// some are arguments (sameLeaves): calls must agree.
	leafUses    []gradTarget
	leafClasses []int
}

func newCompiled(fn reflect.Value, opts []Option) *compiled {
	c := &compiled{fn: fn, opts: options{backend: defaultBackend, limit: 8}}
	for i, o := range opts {
		if o == nil {
			throw("Compile", nil, "pass options made by this package (WithMode, FullGraph …)", "option %d is nil", i)
		}
		o(&c.opts)
	}
	b, ok := backends.Load(c.opts.backend)
	if !ok {
		panic(&Error{Op: "Compile", Reason: fmt.Sprintf("unknown backend %q", c.opts.backend),
			Fix: "use \"eager\" or register the backend with RegisterBackend"})
	}
	c.backend = b.(Backend)
	c.name = funcName(fn)
	return c
}

// checkSignature panics with an *Error naming op if fn's parameters or
// results have a type a compiled function cannot take or return; the same
// call would fail at the first call otherwise, with the same message.
func checkSignature(op string, ft reflect.Type) {
	for i := range ft.NumIn() {
		if err := trace.CheckType(ft.In(i), tensorType); err != nil {
			throw(op, nil, "pass tensors, slices or structs of tensors, and numbers; keep other values in a closure",
				"parameter %d of %v: %v", i, ft, err)
		}
	}
	for i := range ft.NumOut() {
		if err := trace.CheckType(ft.Out(i), tensorType); err != nil {
			throw(op, nil, "return tensors, slices or structs of tensors, and numbers",
				"result %d of %v: %v", i, ft, err)
		}
	}
}

// invoke calls fn with the arguments a compiled function received: for a
// variadic fn the last one is the slice of variadic arguments.
func (c *compiled) invoke(args []reflect.Value) []reflect.Value {
	if c.fn.Type().IsVariadic() {
		return c.fn.CallSlice(args)
	}
	return c.fn.Call(args)
}

func funcName(fn reflect.Value) string {
	if f := runtimeFuncName(fn); f != "" {
		return f
	}
	return fn.Type().String()
}

var tensorType = reflect.TypeOf((*Tensor)(nil))

// flatArgs are a call's arguments as guard and program inputs.
type flatArgs struct {
	leaves trace.Leaves
	// tensors are the arguments' tensors (the first nargs), then the
	// gradients the held sources hold (nil for none), then the values of
	// the scalar sources (ScalarFunc), as of held and scalars.
	tensors []*Tensor
	nargs   int
	held    []gradTarget
	scalars []scalarSource
	call    guard.Call
	dyn     []float64 // dynamic scalars, passed to the program

	// Backing arrays for calls of few tensors, so that flattening them
	// allocates once.
	leafBuf   [4]reflect.Value
	tensorBuf [4]*Tensor
	metaBuf   [4]guard.TensorMeta
}

func (c *compiled) flatten(args []reflect.Value) *flatArgs {
	fa := &flatArgs{}
	fa.leaves.Tensors = fa.leafBuf[:0]
	dynamic := len(c.opts.dynScalars) > 0 && !c.staticScalars.Load()
	for i, a := range args {
		n := len(fa.leaves.Scalars)
		if err := trace.Flatten(a, tensorType, &fa.leaves); err != nil {
			panic(&Error{Op: "Compile", Reason: fmt.Sprintf("argument %d: %v", i, err),
				Fix: "pass tensors, slices or structs of tensors, and numbers"})
		}
		if dynamic && c.opts.dynScalars[i] { // out of the guards, into the program
			fa.dyn = append(fa.dyn, fa.leaves.Scalars[n:]...)
			fa.leaves.Scalars = fa.leaves.Scalars[:n]
		}
	}
	for _, v := range fa.dyn { // guard only whether each is integral
		integral := 0.0
		if ir.ScalarOf(v).DType == Int64 {
			integral = 1
		}
		fa.leaves.Scalars = append(fa.leaves.Scalars, integral)
	}
	held, scalars := c.heldSources(), c.scalarSources()
	fa.held, fa.scalars = held, scalars
	fa.nargs = len(fa.leaves.Tensors)
	if n := fa.nargs + len(held) + len(scalars); n <= len(fa.tensorBuf) {
		fa.tensors, fa.call.Tensors = fa.tensorBuf[:n], fa.metaBuf[:n]
	} else {
		fa.tensors, fa.call.Tensors = make([]*Tensor, n), make([]guard.TensorMeta, n)
	}
	for i, v := range fa.leaves.Tensors {
		fa.tensors[i] = v.Interface().(*Tensor)
	}
	for i, src := range held {
		if leaf := src.leafOf(fa.tensors); leaf != nil && leaf.ag != nil {
			leaf.ag.mu.Lock()
			fa.tensors[fa.nargs+i] = leaf.ag.grad
			leaf.ag.mu.Unlock()
		}
	}
	for i, src := range scalars {
		fa.tensors[fa.nargs+len(held)+i] = src.value()
	}
	for i, t := range fa.tensors {
		m := &fa.call.Tensors[i]
		if t == nil {
			m.DType = ir.Invalid // a nil argument: guarded as nil
			continue
		}
		if t.px != nil {
			panic(&Error{Op: "Compile", Reason: "a traced tensor was passed to a compiled function while tracing another",
				Fix: "call compiled functions from eager code, or call the plain function inside"})
		}
		m.DType, m.Device, m.Contiguous = t.dtype(), t.v.Device(), t.IsContiguous()
		m.SetShape(t.shape())
	}
	fa.call.Scalars = fa.leaves.Scalars
	fa.call.Structure = fa.leaves.Structure
	return fa
}

// call is the compiled function.
func (c *compiled) call(args []reflect.Value) (res []reflect.Value) {
	defer rethrow()
	if tracingHere() != nil {
		// Called by a function being traced: the plain function runs, so
		// that its ops join that trace (as torch.compile inlines), also on
		// captured tensors, which a compiled call would read once.
		return c.invoke(args)
	}
	st := c.opts.stats
	if st != nil && !c.isGrad { // a gradient twin's calls were counted by the function it serves
		st.Calls.Add(1)
	}
	if c.eager.Load() {
		if st != nil {
			st.EagerCalls.Add(1)
		}
		return c.invoke(args)
	}
	fa := c.flatten(args)
	// recording reads the goroutine's id while a NoGrad scope is open
	// anywhere, which costs more than the rest of a small call: ask it
	// only when gradients could be taken.
	if !c.isGrad && (anyRequiresGrad(fa.tensors) || c.capturesGrad.Load()) && recording() {
		if mask := gradMask(fa.tensors); mask != "" || c.capturesGrad.Load() {
			return c.gradTwin(mask).call(args) // gradients: the joint graph
		}
	}
	if k := c.viaResult.Load(); k > 0 {
		return c.callViaResult(args, fa, int(k-1))
	}
	defer c.recoverGrad(&res, args, fa)
	if gc := c.guards.Load(); gc != nil {
		if _, v, ok := gc.Lookup(&fa.call); ok && v.(*entry).validFor(fa) {
			return c.run(v.(*entry), fa, args)
		}
	}
	var compiledNow *entry // set when this goroutine compiled the entry
	v, err, _ := c.flight.Do(callKey(&fa.call), func() (any, error) {
		// Identical calls share this flight; different ones take turns, so
		// each plans against every entry compiled before it.
		c.compileMu.Lock()
		defer c.compileMu.Unlock()
		gc := c.guardCache(fa)
		fa := fa
		for {
			old, v, ok := gc.Lookup(&fa.call)
			if ok && v.(*entry).validFor(fa) {
				return v, nil
			}
			ge, reason := gc.Plan(&fa.call)
			why, limited := reason.Text, reason.LimitReached
			if ok { // a Guard condition failed: compile the entry again, in its place
				why, limited = v.(*entry).failed(fa), c.stale.Add(1)+int64(gc.Len()) > int64(c.opts.limit)
				if ge == nil {
					ge = guard.NewEntry(fa.call, c.policy(fa))
				}
			}
			if limited {
				c.warned.Do(func() {
					logs.Warn("gocompile: recompile limit reached; running eagerly from now on",
						"function", c.name, "limit", c.opts.limit, "reason", why)
				})
				c.eager.Store(true)
				return nil, nil
			}
			if logs.On("recompiles") && gc.Len() > 0 {
				logs.Info("gocompile: recompiling", "function", c.name, "reason", why)
			}
			e, again := c.compileEntry(ge, fa, args)
			if again { // held gradients found, or dynamic scalars dropped
				fa = c.flatten(args)
				continue
			}
			if ok {
				gc.Replace(old, ge, e)
			} else {
				gc.Insert(ge, e)
			}
			compiledNow = e
			if st != nil {
				if st.Compiles.Add(1) > 1 {
					st.Recompiles.Add(1)
				}
				st.Breaks.Add(int64(len(e.breaks)))
			}
			if logs.On("breaks") {
				for _, b := range e.breaks {
					logs.Info("gocompile: graph break", "function", c.name, "reason", b.Reason, "at", b.Loc)
				}
			}
			if logs.On("guards") {
				logs.Text("gocompile: guards", "guards", ge.String(), "function", c.name)
			}
			return e, nil
		}
	})
	if err != nil {
		panic(err)
	}
	if v == nil {
		if st != nil {
			st.EagerCalls.Add(1)
		}
		return c.invoke(args)
	}
	if compiledNow != nil && compiledNow.firstResults != nil {
		return compiledNow.firstResults
	}
	e := v.(*entry)
	if compiledNow == nil && (e.ninputs != len(fa.tensors) || !e.validFor(fa)) {
		// This call shared the flight of another, which compiled for its
		// own call: the flight found inputs this call's flattening
		// predates (held gradients, nil or not), or a Guard condition or
		// the leaves differ now. The call finds its own entry (counted
		// once).
		if st != nil && !c.isGrad {
			st.Calls.Add(-1)
		}
		return c.call(args)
	}
	if e.ninputs != len(fa.tensors) {
		fa = c.flatten(args) // this call compiled the entry, with the inputs it found
	}
	return c.run(e, fa, args)
}

// guardCache returns the function's guard entries, making them at the
// first call, when the dims MarkDynamic marked on its arguments are known.
// The caller holds compileMu.
func (c *compiled) guardCache(fa *flatArgs) *guard.Cache {
	if gc := c.guards.Load(); gc != nil {
		return gc
	}
	c.guards.Store(guard.NewCache(c.policy(fa), c.opts.limit))
	return c.guards.Load()
}

// policy is the dynamic-shape policy: the options, and the dims that
// MarkDynamic marked on the call's tensors.
func (c *compiled) policy(fa *flatArgs) guard.Policy {
	if c.isGrad {
		// A joint graph of forward and backward is traced at static
		// shapes: the backward's seeds and reductions to each operand's
		// shape are made at the sizes of the call traced.
		return guard.Policy{}
	}
	p := guard.DefaultPolicy()
	if c.opts.dynamic != nil {
		p.Dynamic = *c.opts.dynamic
		p.AutoDynamic = *c.opts.dynamic
	}
	for i, t := range fa.tensors {
		for d := range 64 {
			if t != nil && t.dynDims&(1<<d) != 0 {
				if p.Marked == nil {
					p.Marked = map[[2]int]bool{}
				}
				p.Marked[[2]int{i, d}] = true
			}
		}
	}
	return p
}

// callKey identifies calls that must share one compilation.
func callKey(call *guard.Call) string {
	var b strings.Builder
	for _, t := range call.Tensors {
		fmt.Fprintf(&b, "%v%v%v%v;", t.DType, t.Device, t.Contiguous, t.Shape[:min(t.Rank, guard.MaxRank)])
	}
	fmt.Fprint(&b, call.Scalars, call.Structure)
	return b.String()
}

// compileEntry traces fn for the call and compiles what it recorded. It
// reports again, compiling nothing, when the call must be flattened and
// planned again: the trace read a leaf's held gradient or a ScalarFunc
// that is not yet an input (errNewInput), or dynamic scalars could not be honoured (they are
// guarded by value from then on).
func (c *compiled) compileEntry(ge *guard.Entry, fa *flatArgs, args []reflect.Value) (e *entry, again bool) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, errNewInput) {
				e, again = nil, true
				return
			}
			panic(r)
		}
	}()
	if len(fa.dyn) > 0 {
		e, why := c.compileDynamic(fa, args)
		if e == nil {
			if logs.On("recompiles") {
				logs.Info("gocompile: dynamic scalars guarded by value", "function", c.name, "reason", why)
			}
			c.staticScalars.Store(true)
			return nil, true
		}
		return e, false
	}
	tr := c.compileTracer()
	defer func() { tr.release() }()
	tr.onShapeRead = func(sizes []int) { specializeRead(ge, fa, sizes) }
	results := c.traceRun(tr, fa, args)
	if tr.mut.retrace && len(tr.breaks) == 0 {
		// fn writes a tensor it also reaches otherwise: trace again with
		// that storage bound as written, so that reads before the write
		// are recorded too, not run once now.
		written := tr.writtenKeys()
		tr.release()
		tr = c.compileTracer()
		tr.bind(written)
		tr.onShapeRead = func(sizes []int) { specializeRead(ge, fa, sizes) }
		results = c.traceRun(tr, fa, args)
	}
	e = &entry{breaks: tr.breaks, ninputs: len(fa.tensors)}
	if len(tr.breaks) > 0 { // each call runs fn live: its Go values are read anew
		// fn has run up to its last segment: finish this call's work here
		// rather than run fn again.
		e.firstResults = c.finish(tr, results)
		e.graphs = tr.segments
		e.written = tr.writtenKeys()
		return e, false
	}
	g := tr.g
	if c.isGrad && !tr.backwardCalled {
		switch ks := resultsRequiringGrad(results); {
		case len(ks) > 0 && (len(tr.argWrites) > 0 || len(tr.mut.known) > 0):
			// The backward would run fn again (callViaResult), writing
			// again and reading what it wrote.
			panic(&errGradEager{why: "a result requires gradients without Backward in the function, which writes tensors in place"})
		case len(ks) == 1:
			panic(&errGradResult{k: ks[0]}) // the forward compiles plainly, the backward apart
		case len(ks) > 1:
			panic(&errGradEager{why: "more than one result requires gradients without Backward in the function"})
		}
	}
	rts := resultTensors(results)
	g.Outputs = resultNodes(tr, rts)
	e.nresults = len(g.Outputs)
	versions, stores := tr.versionNodes()
	g.Outputs = append(g.Outputs, versions...)
	e.stores = stores
	argVersions, _ := tr.argVersions()
	g.Outputs = append(g.Outputs, argVersions...)
	e.argWrites, e.resultArgs = tr.entryArgWrites(rts)
	for _, w := range e.argWrites {
		// The writes' layouts are the traced sizes: a written argument's
		// dims are static.
		for d := range fa.tensors[w.index].shape() {
			ge.Specialize(w.index, d)
		}
	}
	targets, grads := tr.gradOutputs()
	for _, v := range grads {
		g.Outputs = append(g.Outputs, tr.nodeOf(v, "gradient"))
	}
	e.grads = targets
	e.checks = tr.checks
	e.leafUses, e.leafClasses = tr.leafUses, leafClasses(tr.leafUses, tr.args)
	e.graphs = []*ir.Graph{g}
	if len(e.argWrites) > 0 {
		e.constKeys = constStorages(g)
	}
	e.prog = c.compileGraph(g, inputSymbols(ge, fa), true)
	e.sources = c.resultSources(g)
	e.template = results
	return e, false
}

// specializeRead makes dynamic dims whose size user code read static in
// the entry being compiled: fn may have computed with the number.
func specializeRead(ge *guard.Entry, fa *flatArgs, sizes []int) {
	for _, dd := range ge.DynamicDims() {
		t := fa.tensors[dd[0]]
		for _, s := range sizes {
			if t != nil && s == t.shape()[dd[1]] {
				ge.Specialize(dd[0], dd[1])
				break
			}
		}
	}
}

// traceRun runs fn on proxies for the call's tensors and returns its
// results (proxies, or concrete values for what was materialised).
func (c *compiled) traceRun(tr *tracer, fa *flatArgs, args []reflect.Value) []reflect.Value {
	proxies := make([]reflect.Value, len(fa.tensors))
	for i, t := range fa.tensors {
		if t == nil {
			proxies[i] = reflect.Zero(tensorType)
			continue
		}
		if i >= fa.nargs+len(fa.held) { // a ScalarFunc's value
			p := tr.proxyFor(tr.input(t, "scalar function"))
			tr.scalarIns = append(tr.scalarIns, p)
			proxies[i] = reflect.ValueOf(p)
			continue
		}
		if i >= fa.nargs { // a gradient a leaf held at call time
			proxies[i] = reflect.ValueOf(tr.proxyFor(tr.input(t, "held gradient")))
			continue
		}
		p := tr.proxyFor(tr.input(t, "argument"))
		p.px.arg = &argState{index: i, px: p.px} // fn may write it (argwrite.go)
		if tr.argOf == nil {
			tr.argOf = map[*Tensor]int{}
		}
		tr.argOf[p] = i
		if t.RequiresGrad() {
			// Its gradient is t's: Backward in a gradient twin, and Grad,
			// SetGrad and ZeroGrad in any trace (a gradient norm over
			// parameters passed as arguments, inside NoGrad), reach t.
			p.ag = &gradState{requires: true, arg: t}
		}
		proxies[i] = reflect.ValueOf(p)
	}
	tr.args = fa.tensors[:fa.nargs]
	tr.scalarSrcs = fa.scalars
	if held := fa.held; len(held) > 0 {
		tr.held = map[*Tensor]*Tensor{}
		for i, src := range held {
			if leaf := src.leafOf(tr.args); leaf != nil {
				tr.held[leaf], _ = proxies[fa.nargs+i].Interface().(*Tensor)
			}
		}
	}
	k := 0
	next := func() reflect.Value { k++; return proxies[k-1] }
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		in[i] = trace.Rebuild(a, tensorType, next)
	}
	defer tr.enter()()
	return c.invoke(in)
}

// resultNodes lists the graph nodes of fn's tensor results.
func resultNodes(tr *tracer, ts []*Tensor) []*ir.Node {
	nodes := make([]*ir.Node, len(ts))
	for i, t := range ts {
		if t == nil {
			panic(&Error{Op: "Compile", Reason: "a compiled function returned a nil tensor", Fix: "return a tensor"})
		}
		nodes[i] = tr.nodeOf(t, "result")
	}
	return nodes
}

// resultTensors lists fn's tensor results, flattened.
func resultTensors(results []reflect.Value) []*Tensor {
	var l trace.Leaves
	for _, r := range results {
		if err := trace.Flatten(r, tensorType, &l); err != nil {
			panic(&Error{Op: "Compile", Reason: "result: " + err.Error(), Fix: "return tensors, slices or structs of tensors, and numbers"})
		}
	}
	ts := make([]*Tensor, len(l.Tensors))
	for i, v := range l.Tensors {
		ts[i] = v.Interface().(*Tensor)
	}
	return ts
}

// run serves a call from a compiled entry.
func (c *compiled) run(e *entry, fa *flatArgs, args []reflect.Value) []reflect.Value {
	if e.prog == nil { // a function with graph breaks: run fn, segment by segment
		noArgumentOn(fa.tensors, e.written)
		tr := newTracer(c, false)
		defer tr.release()
		tr.bind(e.written)
		results := c.traceRun(tr, fa, args)
		return c.finish(tr, results)
	}
	if len(e.stores) > 0 {
		noArgumentWritten(fa.tensors, e.stores)
	}
	if len(e.argWrites) > 0 {
		checkArgWrites(fa.tensors[:fa.nargs], e.argWrites, e.constKeys)
	}
	var outs []*Tensor
	in := present(fa.tensors) // the graph's inputs: a nil argument is none
	if ap, ok := e.prog.(arrayProgram); ok {
		outs = tensorsFor(ap.runArrays(in, fa.dyn), e.sources, in)
	} else {
		outs = e.prog.Run(in)
	}
	c.checkOutputs(outs, e.graphs[0])
	if len(e.grads) > 0 { // the gradients of leaves the run computed, set or cleared
		ng := len(outs) - numGradOutputs(e.grads)
		applyGrads(e.grads, outs[ng:], fa.tensors)
		outs = outs[:ng:ng]
	}
	if len(e.stores) > 0 || len(e.argWrites) > 0 { // the last versions of the tensors fn writes
		versions := outs[e.nresults:]
		outs = outs[:e.nresults:e.nresults]
		written := make([]*Tensor, len(e.argWrites))
		for i, w := range e.argWrites {
			written[i] = fa.tensors[w.index]
		}
		// Results read before the writes keep what they read; results
		// that are written arguments themselves become the caller's
		// tensors (giveArgs), with nothing to keep.
		for k, i := range e.resultArgs {
			if i >= 0 {
				outs[k] = nil
			}
		}
		detachAliases(outs, slices.Concat(e.stores, arraysOf(written)))
		writeBack(e.stores, versions[:len(e.stores)])
		writeArgs(written, versions[len(e.stores):])
		giveArgs(outs, e.resultArgs, fa.tensors)
	}
	k := 0
	next := func() reflect.Value { k++; return reflect.ValueOf(outs[k-1]) }
	res := make([]reflect.Value, len(e.template))
	for i, r := range e.template {
		res[i] = trace.Rebuild(r, tensorType, next)
	}
	return res
}

// finish runs the last segment of a traced run and puts real tensors in
// place of the proxies among the results.
func (c *compiled) finish(tr *tracer, results []reflect.Value) []reflect.Value {
	rts := resultTensors(results)
	nodes := resultNodes(tr, rts)
	nres := len(nodes)
	targets, grads := tr.gradOutputs()
	for _, g := range grads {
		nodes = append(nodes, tr.nodeOf(g, "gradient"))
	}
	vals := tr.finishSegment(nodes)
	applyGrads(targets, vals[nres:], tr.args)
	vals = vals[:nres]
	giveArgs(vals, tr.resultArgs(rts), tr.args)
	k := 0
	next := func() reflect.Value { k++; return reflect.ValueOf(vals[k-1]) }
	out := make([]reflect.Value, len(results))
	for i, r := range results {
		out[i] = trace.Rebuild(r, tensorType, next)
	}
	return out
}

// runSegment runs a segment graph with its inputs bound, compiling it on
// first use; segments with the same structure share one compilation.
func (c *compiled) runSegment(g *ir.Graph, bound []*Tensor) []*Tensor {
	// A backend's own tensor ops compute: they are no part of the trace.
	defer suspendTracing()()
	key := graphKey(g)
	v, _ := c.segments.LoadOrStore(key, &segmentEntry{})
	se := v.(*segmentEntry)
	se.once.Do(func() {
		se.prog = c.compileGraph(g, nil, false)
		se.sources = c.resultSources(g)
	})
	var outs []*Tensor
	if ap, ok := se.prog.(arrayProgram); ok {
		outs = tensorsFor(ap.runArrays(bound, nil), se.sources, bound)
	} else {
		outs = se.prog.Run(bound)
	}
	c.checkOutputs(outs, g)
	return outs
}

// checkOutputs panics with an *Error if a program returned other than one
// tensor per output of its graph (a backend's bug), rather than let the
// results be misassigned or indexed out of range.
func (c *compiled) checkOutputs(outs []*Tensor, g *ir.Graph) {
	if len(outs) != len(g.Outputs) {
		throw("Compile", nil, "fix the backend: Program.Run returns one tensor per graph output",
			"backend %q returned %d outputs for a graph with %d", c.opts.backend, len(outs), len(g.Outputs))
	}
}

// inputSymbols lists, per tensor input, which dims the guard entry made
// symbolic (symbol k as k+1).
func inputSymbols(ge *guard.Entry, fa *flatArgs) [][]int {
	var syms [][]int // per graph input: a nil argument is none
	for i, t := range fa.tensors {
		if t == nil {
			continue
		}
		s := make([]int, len(t.shape()))
		for d := range t.shape() {
			if k, dynamic := ge.Symbol(i, d); dynamic {
				s[d] = k + 1
			}
		}
		syms = append(syms, s)
	}
	return syms
}

// present is ts without its nil tensors: the inputs of a graph traced
// from a call with those arguments (a nil argument is no input).
func present(ts []*Tensor) []*Tensor {
	for _, t := range ts {
		if t == nil {
			out := make([]*Tensor, 0, len(ts))
			for _, t := range ts {
				if t != nil {
					out = append(out, t)
				}
			}
			return out
		}
	}
	return ts
}

// hasSymbols reports whether some input dim is symbolic (dynamic).
func hasSymbols(syms [][]int) bool {
	for _, s := range syms {
		for _, v := range s {
			if v != 0 {
				return true
			}
		}
	}
	return false
}

// compileGraph optimises g, marks its symbolic dims, and hands it to the
// backend. ownInputs says g's inputs are a call's own tensors (a whole
// function's graph), which its writes may update in place.
func (c *compiled) compileGraph(g *ir.Graph, syms [][]int, ownInputs bool) Program {
	optimize(g)
	markInPlace(g, !hasSymbols(syms), ownInputs)
	if syms != nil {
		g.InferSymbols(syms)
	}
	var file string // where GOCOMPILE_DEBUG_DIR keeps the graph
	if dir := os.Getenv("GOCOMPILE_DEBUG_DIR"); dir != "" {
		file = dumpGraph(dir, c.name, g)
	}
	if logs.On("graph") {
		args := []any{"function", c.name}
		if file != "" {
			args = append(args, "file", file)
		}
		logs.Text("gocompile: graph", "graph", graphString(g), args...)
	}
	var p Program
	var err error
	if cb, ok := c.backend.(configurable); ok {
		p, err = cb.compileWith(g, backendConfig{mode: c.opts.mode, artifacts: array.NewArtifacts(cacheFor(c.opts.cacheDir), c.name)})
	} else {
		p, err = c.backend.Compile(g)
	}
	if err == nil && p == nil {
		err = errors.New("the backend returned neither a program nor an error")
	}
	if err != nil {
		logs.Warn("gocompile: backend failed; running the graph eagerly", "function", c.name, "backend", c.opts.backend, "err", err)
		return newEagerProgram(g)
	}
	return p
}

var dumps atomic.Int64

// dumpGraph writes g to dir, as text and as Graphviz, and returns the
// text file's path ("" when it could not be written).
func dumpGraph(dir, name string, g *ir.Graph) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	base := strings.NewReplacer("/", "_", "*", "", "(", "", ")", "").Replace(name)
	path := filepath.Join(dir, fmt.Sprintf("%s.%d", base, dumps.Add(1)))
	os.WriteFile(path+".dot", []byte(g.DOT()), 0o644) // for Graphviz: dot -Tsvg
	if os.WriteFile(path+".graph.txt", []byte(graphString(g)), 0o644) != nil {
		return ""
	}
	return path + ".graph.txt"
}

// arrayProgram is a Program of the built-in backends, which run on the
// tensors' arrays.
type arrayProgram struct{ p array.Program }

func (ap arrayProgram) Run(inputs []*Tensor) []*Tensor {
	return tensorsFor(ap.runArrays(inputs, nil), nil, inputs)
}

// runArrays runs the program on the inputs' arrays, with the call's
// dynamic scalars if it takes them.
func (ap arrayProgram) runArrays(inputs []*Tensor, scalars []float64) []*array.Array {
	if ep, ok := ap.p.(*array.EagerProgram); ok && ep.HasScalars() {
		return ep.RunScalars(arraysOf(inputs), scalars)
	}
	return ap.p.Run(arraysOf(inputs))
}

// resultSource is where a graph's output comes from when the graph does
// not compute it: argument input, or constant, or (neither) a new array.
type resultSource struct {
	input    int // -1: not an input
	constant *Tensor
}

// resultSources says, per output of g, whether it is one of g's inputs
// or a constant tensor, so that a call returns that tensor itself (as fn
// returning x returns x), found once per compile, not per call.
func (c *compiled) resultSources(g *ir.Graph) []resultSource {
	src := make([]resultSource, len(g.Outputs))
	for i, n := range g.Outputs {
		src[i].input = -1
		switch n.Kind {
		case ir.InputNode:
			src[i].input = n.Index
		case ir.ConstNode:
			if t, ok := c.consts.Load(n.Value); ok {
				src[i].constant = t.(*Tensor)
			}
		}
	}
	return src
}

// tensorsFor gives a program's results as tensors: the input or constant
// src names, else a new tensor. Without src (a program run by a custom
// backend) an output that is an input's array is that input.
func tensorsFor(outs []*array.Array, src []resultSource, inputs []*Tensor) []*Tensor {
	res := make([]*Tensor, len(outs))
	for i, a := range outs {
		switch {
		case a == nil:
		case src != nil && src[i].constant != nil:
			res[i] = src[i].constant
		case src != nil && src[i].input >= 0 && inputs[src[i].input] != nil && inputs[src[i].input].v == a:
			res[i] = inputs[src[i].input]
		case src == nil:
			res[i] = wrap(a)
			for _, t := range inputs {
				if t != nil && t.v == a {
					res[i] = t
				}
			}
		default:
			res[i] = wrap(a)
		}
	}
	return res
}

func arraysOf(ts []*Tensor) []*array.Array {
	out := make([]*array.Array, len(ts))
	for i, t := range ts {
		if t != nil {
			out[i] = t.v
		}
	}
	return out
}

// newEagerProgram runs g node by node with the eager kernels.
func newEagerProgram(g *ir.Graph) Program { return arrayProgram{array.NewEagerProgram(g, nil)} }
