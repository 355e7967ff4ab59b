// Package optim holds optimizers for parameters trained with package
// tensor's gradients: SGD (with momentum) and AdamW, computed as
// torch.optim computes them, and ClipGradNorm. A step updates each
// parameter in place, inside tensor.NoGrad, from the gradient Backward
// accumulated in it; ZeroGrad clears the gradients for the next step.
// With Compiled set, SGD and AdamW run each step as one compiled function
// (tensor.Compile) over every parameter, compiled once: a fused
// multi-tensor kernel, as torch.optim's fused=True. Each parameter's update
// (its buffers, then the parameter, which reads them from registers) is
// one unit of the kernel, reading the gradient, buffers and parameter once
// and storing the new values in place; on a GPU one launch updates every
// parameter up to a million elements, as many as 4 KB of kernel
// parameters hold (about 40 for AdamW; more take further launches), and a
// larger parameter runs its own kernel.
package optim
