// Package stats counts what gocompile's runtime does in a process: how
// many kernels it generated and compiled, graphs it partitioned, CUDA
// graphs it replayed, autotuning searches it ran. Tests read the counters
// to check that a path was (or was not) taken, as torch.compile's tests
// read its counters.
package stats

import "sync/atomic"

var (
	// KernelSources counts generated kernel sources (kernels found in the
	// artifact cache by name need none).
	KernelSources atomic.Int64
	// Compiling counts NVRTC compiles under way, and MaxCompiling is the
	// most there were at once.
	Compiling, MaxCompiling atomic.Int64
	// Partitions counts graphs partitioned into fusion regions (not
	// rebuilt from a cached layout).
	Partitions atomic.Int64
	// GraphReplays counts CUDA graph launches.
	GraphReplays atomic.Int64
	// AutotuneSearches counts autotuning searches run (not found in a
	// cache).
	AutotuneSearches atomic.Int64
	// LtProducts counts matrix products run through cuBLASLt.
	LtProducts atomic.Int64
	// DirectStores counts fused kernels that stored a value into the
	// storage it overwrites instead of a buffer copied there.
	DirectStores atomic.Int64
	// CatParts counts values fused kernels wrote into their slices of a
	// Cat's result, which then copied nothing for them.
	CatParts atomic.Int64
	// ProductPrologues counts matrix-product kernels that computed their
	// first operand from a row region (a norm) themselves.
	ProductPrologues atomic.Int64
	// ComboLaunches counts combo kernels launched (fused regions of
	// different shapes run as one launch).
	ComboLaunches atomic.Int64
	// PartitionedBackwards counts backwards of compiled functions run as
	// the backward half of a split joint graph, from saved values.
	PartitionedBackwards atomic.Int64
)
