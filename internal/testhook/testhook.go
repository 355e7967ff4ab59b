// Package testhook holds what tests replace to make gocompile's runtime
// fail on purpose. Nothing sets it outside tests.
package testhook

// KernelFault, when set, makes the generated kernels it returns an error
// for fail to build, as an NVRTC failure would.
var KernelFault func(name string) error
