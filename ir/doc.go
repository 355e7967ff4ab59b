// Package ir is gocompile's intermediate representation and its op
// registry: the one place where each op's meaning lives.
//
// An Op entry gives the op's name, arity, kind (pointwise, reduction, view,
// extern, composite), type rule (PyTorch's promotion), shape rule
// (broadcasting, reduction, view layouts) and semantics:
//
//   - a pointwise op's semantics is an Expr over primitives (Prim). Each
//     primitive is defined once, as Go loops over blocks of values (see
//     CompileBlock) and as C for generated CUDA code (see Expr.C and
//     CPrelude), so CPU kernels and code generators cannot disagree. Blocks
//     compiled with FastMath (the inductor backend's fused CPU regions)
//     evaluate float32 exp, log, tanh and erf with polynomial
//     approximations instead, within 1 to 2 ulps of the exact values, as
//     CUDA's float32 functions are; FastMath's doc states the contract;
//   - a reduction's semantics is a Reducer (sum, mean, max, argmax …);
//   - a view's is a layout rule from input shape and strides to output;
//   - a composite op (softmax, layer norm, var, linear) is a decomposition
//     into other ops, written once against the Builder interface, which both
//     eager execution and tracing implement.
//
// An op's derivative (Op.VJP, grad.go) is written once too, as ops
// against the same Builder: given the operands, the result and the
// gradient of the result, the gradients of the operands. Composites
// without one differentiate through their decomposition; SumTo reduces a
// broadcast gradient to its operand's shape.
//
// Graph passes rewrite a traced Graph in place (Optimize runs them to a
// fixed point): Decompose, Simplify, SinkCasts (casts moved below views
// and into a Cat's parts, so kernels convert as they load), CSE, constant
// folding and DCE; SplitCasts gives each reader of a cheap cast its own
// copy before the graph is partitioned into kernels.
//
// Shape helpers (Broadcast, NormDim, ViewStrides, InferShape) and the type
// rules (PromoteTypes, ResultType) are exported for the packages above.
package ir
