// Package optim holds optimizers for parameters trained with package
// tensor's gradients: SGD (with momentum) and AdamW, computed as
// torch.optim computes them, and ClipGradNorm. A step updates each
// parameter in place, inside tensor.NoGrad, from the gradient Backward
// accumulated in it; ZeroGrad clears the gradients for the next step.
//
// With Compiled set, SGD and AdamW run each step as one compiled function
// (tensor.Compile) over every parameter, compiled once: a fused
// multi-tensor kernel, as torch.optim's fused=True. Each parameter's update
// (its buffers, then the parameter, which reads them from registers) is
// one unit of the kernel, reading the gradient, buffers and parameter once
// and storing the new values in place; on a GPU one launch updates every
// parameter up to a million elements, as many as the device's kernel
// parameters hold (32 KB with a CUDA 12.1 driver on sm_70 and later, else
// 4 KB: about 40 AdamW units), and a larger parameter runs its own kernel.
//
// Step and ZeroGrad may also run inside a compiled function, so that a
// whole training step (ZeroGrad, the loss, Backward, Step) is one graph.
// There the step count (AdamW's bias corrections) and SGD's per-parameter
// "momentum started" flags live in 0-d tensors the graph updates, as
// torch.optim's capturable state; the learning rate is read on every call
// (tensor.ScalarFunc), so a schedule runs without recompiling, and the
// other hyperparameters are guarded (tensor.Guard). Clip with
// ClipGradNormTensor there: it reads nothing back.
package optim
