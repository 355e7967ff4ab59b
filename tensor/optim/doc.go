// Package optim holds optimizers for parameters trained with package
// tensor's gradients: SGD (with momentum) and AdamW, computed as
// torch.optim computes them, and ClipGradNorm. A step updates each
// parameter in place, inside tensor.NoGrad, from the gradient Backward
// accumulated in it; ZeroGrad clears the gradients for the next step.
// With Compiled set, SGD and AdamW run each step as one compiled function
// (tensor.Compile) over every parameter, compiled once: its buffers and
// parameters are stored in place, and on a GPU the updates of parameters
// up to a million elements run as multi-tensor kernels, one launch for up
// to 32 of them (larger ones keep a kernel each).
package optim
