// Package trace holds what gocompile's tracer needs that does not depend on
// the tensor type: where user code is (file:line), records of graph
// breaks, and pytree-style flattening of Go values into tensor and scalar
// leaves and back.
//
// Package tensor runs a function on proxy tensors; each op with a proxy
// operand records a node in an ir.Graph instead of computing, tagged with
// Loc(). Reading a proxy's values breaks the graph; Break records why and
// where.
package trace
