// Package tensor is gocompile's public API: n-dimensional arrays with
// PyTorch's semantics, computed eagerly.
//
// A Tensor has a shape, strides, an offset, an element type (DType) and a
// device, over a storage that views share: Reshape, Transpose, Permute,
// Expand, Squeeze, Unsqueeze, Slice, Narrow, Select, Split and Flatten move
// no data, and Contiguous copies only when it must.
//
// Ops follow PyTorch: binary ops broadcast their operands (NumPy rules) and
// promote their types (bool < integer < floating; float16 with bfloat16
// gives float32; integer division and math functions give Float32).
// Float16 and BFloat16 are stored in 16 bits and computed in float32.
// Every op is described once, in package gocompile/ir's registry, and the
// kernels derive from that description. A Tensor is the user's handle on
// an array.Array (package gocompile/array), which holds the storage and
// runs the kernels; compiled programs run on arrays too.
//
// # Devices
//
// Tensors live on the CPU or on a CUDA GPU (To(CUDA(0)), or
// GOCOMPILE_DEVICE=cuda for every new tensor). Every op runs on both: on a
// GPU, as a kernel that package inductor generates from the op's registry
// entry and NVRTC compiles once per configuration. GPU ops are queued in
// order on one stream per device; reading values (Float32s, Item, String)
// waits for them. Device memory comes from a caching allocator and returns
// to it when a tensor is garbage collected. Go's collector paces itself by
// the host heap alone, so before the allocator takes more memory from the
// device it collects, once the memory tensors hold has grown since the
// last collection by as much as was live then and by at least a sixteenth
// of the device: a loop that drops a large result per call reuses cached
// blocks instead of taking new ones until the host heap is collected.
//
// # Compile
//
// Compile wraps a function of tensors and returns one of the same type
// that traces it into a graph on first call and replays the compiled graph
// afterwards, behind guards on its arguments; see Compile, Explain and
// Cond. A compiled function may write the tensors it captures and its
// arguments (a KV cache: Copy into a view, IndexCopyInPlace or
// IndexPutInPlace at a position held in a tensor; Fill, Set): the writes
// are part of the graph, later reads in the function see them, and they
// reach the tensors on every call, as eagerly. Ops on captured tensors
// alone (w.Mul(w), pos.AddScalar(1)) are recorded too, so every call reads
// their current values.
//
// # Gradients
//
// Eager reverse-mode differentiation, as PyTorch's autograd:
// SetRequiresGrad(true) makes a floating tensor a leaf whose gradient
// Backward computes, through every op applied to it, adding it to Grad
// until ZeroGrad. Each op's derivative is written once, as ops, next to
// its registry entry (gocompile/ir), so gradients run on the tensors'
// device; composite ops differentiate through their decomposition.
// NoGrad turns recording off in one goroutine; Detach gives a tensor
// without history; writing in place into a value saved for a gradient
// before Backward reads it is an error. Package gocompile/tensor/optim
// holds SGD, AdamW and ClipGradNorm.
//
// A compiled function that computes a loss from tensors that require
// gradients (arguments or captured parameters) and calls Backward is a
// compiled training step: Compile traces forward and backward into one
// graph, fuses and replays it, and each call adds the gradients to the
// leaves as an eager Backward does. A compiled model whose result
// requires gradients (Backward taken after the call) splits its joint
// graph of forward and backward in two, as AOTAutograd does: the forward
// half returns the results and the values the backward needs (chosen by
// a minimum cut that saves products' values and recomputes cheap
// pointwise ones), and Backward runs the backward half from them. Its
// first backward, which traces the joint graph, recomputes the forward
// instead. Explain shows both halves and the saved values. A graph break in such a
// function, more than one result requiring gradients, an in-place write
// (the backward would run the function, and the write, again), or an
// argument that requires gradients but is not a leaf runs it eagerly
// instead (with one warning). Not yet differentiable: the AsStrided writes.
//
// Inside a compiled function gradients are traced too: Grad returns a
// leaf's gradient as the call has it so far (what it held when the call
// began, a graph input, plus what Backward added), and SetGrad and
// ZeroGrad replace it; the leaf gets the result when the call returns. So
// a whole training step — ZeroGrad, the loss, Backward and an optimizer's
// Step — compiles into one graph. Code that keeps state in Go values
// checks Compiling and keeps it in tensors instead (optim's step counts);
// ScalarFunc reads a Go value anew on every call (a scheduled learning
// rate), and Guard ties the compiled graph to Go values it read (betas):
// when one changes, the function is compiled again.
//
// # Logging
//
// gocompile logs through log/slog: warnings (a function that reached its
// recompile limit, a kernel that failed to build, a cache directory that
// cannot be written), and what the environment variable GOCOMPILE_LOGS
// asks for, a comma-separated list of graph, guards, recompiles, breaks,
// fusion, output_code, cache, cudagraphs and autotune, or all. The logs
// go to slog.Default() unless SetLogger names another logger.
//
// Graphs, guards, fusion plans and generated kernel sources span many
// lines. Each is one record: a header (what it is, the function, the
// kernel, and the file GOCOMPILE_DEBUG_DIR keeps it in) and the text in
// an attribute, which a JSON or text handler encodes as any string.
// Through log/slog's own default handler, which prints through package
// log for a person at a terminal, the header line is followed by the
// text as it is:
//
//	2025/01/02 15:04:05 INFO gocompile: graph function=main.forward
//	func graph(x0 float32[64, 256]) (float32[64, 10]) {
//	    v1 := x0.MatMul(c0)  // float32[64, 10]  main.go:36
//	    return v1
//	}
//
// # Errors
//
// Misusing an op (shapes that do not broadcast, a dim out of range, an
// unsupported dtype, operands on different devices) is a programming error:
// the op panics with an *Error that names the op, the operands' shapes and
// the fix. A service that builds tensors from requests wraps the work in Try
// to turn such a panic into an error for that request alone.
//
// # Concurrency
//
// Tensors are safe to read from many goroutines, on any device. The in-place methods (Set,
// Fill, Copy) write to shared storage and must not race with other use of
// the same elements. Large ops split their work across GOMAXPROCS
// goroutines.
package tensor
