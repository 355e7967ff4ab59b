// Package program runs graphs for the "inductor" backend: it partitions a
// graph into fusion regions (package fuse), runs each region as one
// kernel that package inductor generates (a fused pointwise region or
// horizontal group, a row region such as softmax or layer norm, a matrix
// product with its epilogue, and with the norm ahead of it as its
// prologue where its kernel can compute it), and runs the remaining nodes
// with the eager kernels of package array.
//
// On the CPU fused regions run as block programs over all cores; on a GPU
// as CUDA kernels compiled through NVRTC and kept in the artifact cache,
// with the graph's fusion layout, so a new process finds both. Values
// between regions live in buffers reused by liveness (fuse.Plan, arenas
// of package array); the kernels computing a Cat's parts write them into
// the Cat's result, each into its slice (fuse.InPlaceCats), so that the
// Cat copies none of them. With Config.CUDAGraphs a program's runs on a GPU are
// captured and replayed as CUDA graphs, and with Config.Autotune launch
// shapes and library algorithms are timed on the device. In a graph, a
// product whose weight is an input or constant launches as a programmatic
// dependent of the kernel ahead, loading its weight while that kernel
// ends; where its first operand is one too, it runs wholly ahead and
// waits only before its stores (findDependentProducts).
//
// A kernel that fails to build makes its program run with the eager
// kernels from then on, with one warning.
//
// Importing the package also makes eager composite ops on a GPU (Softmax,
// LogSoftmax, LayerNorm, RMSNorm, Var over the last dims) run as the one
// row kernel their decomposition fuses into (array.SetCompositeRunner).
package program
