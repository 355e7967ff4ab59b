// Package fuse partitions a graph into fusion regions, groups of nodes a
// backend runs as one kernel, and plans the buffers of the values that
// remain between them.
//
// Regions come in three kinds:
//
//   - Pointwise regions (vertical fusion): a pointwise node absorbs the
//     pointwise nodes that produce its operands when every use of them lies
//     inside the region, they have the region's shape and device, and
//     their values would survive a store and reload exactly (float32,
//     float64, int64 and bool intermediates), or the kernel rounds them
//     as a store would (float16 and bfloat16, through ir.CastVia); int32
//     ones stay materialised. A producer read through one view that only
//     re-indexes (transpose, permute, squeeze, unsqueeze, slice) fuses too:
//     the kernel reads the producer's inputs through that view (Input.Views),
//     so nothing is copied or materialised. The region's value is one
//     expression over the registry's primitives (Region.Expr), which CPU
//     block loops and the CUDA code generator both run.
//   - Row regions (reduction fusion): reductions over a set of dims
//     together with their pointwise prologue (over the full shape) and
//     epilogue (at the reduced shape): softmax, log-softmax, layer norm, RMS
//     norm, means and variances over the last dim, and the same over any
//     other dims, such as Mean(0), Var([0, 2]) or Softmax(0). Row.Dims names
//     the reduced dims (nil: the last). See Row.
//   - Every other node (matmul and other extern ops, arg reductions,
//     reductions over every dim, views) is a region of its own.
//
// Horizontal then groups pointwise regions: over one iteration space into
// one kernel that reads each input once, and small regions of different
// shapes (up to MaxComboElems elements, reading their inputs element for
// element or through views and broadcasts) into combos of units, which a
// backend runs as one multi-tensor launch: an optimizer's update of every
// parameter, a decode step's rotations of its queries and keys. A
// region may join the group (or unit) that computes values it reads at its
// own shape; the kernel then keeps them in registers and still stores
// them (a parameter's moments and its update, which reads them). In-place
// writes and views move up to just after what they read, so that what
// reads them can join groups early.
//
// PlanBuffers assigns the values regions write to buffers reused once the
// values die, and reports the plan's peak memory next to eager
// execution's. InPlaceCats finds the Cats whose parts the kernels
// computing them can write straight into the Cat's result, so that the
// Cat copies nothing (a rotary embedding's two halves).
package fuse
