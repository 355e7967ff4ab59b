package kcache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// CompileAll looks up or computes the entries of keys in parallel, at
// most runtime.NumCPU() at a time: a graph's kernels are independent, and
// NVRTC compiles one on one core. compute(ctx, i) builds the entry of
// keys[i]; it runs only on a miss, and once for keys that repeat.
//
// CompileAll returns the entries in the order of keys. On the first error
// it cancels ctx for the computes still running, starts no more, and
// returns that error with the entries it has; the others are zero. When a
// compute panics, CompileAll cancels the rest likewise and panics with
// the same value in the caller's goroutine, where it can be recovered,
// rather than in a worker's, where it would end the process.
func (c *Cache) CompileAll(ctx context.Context, keys []Key, compute func(ctx context.Context, i int) (Entry, error)) ([]Entry, error) {
	if ctx == nil || compute == nil {
		return nil, errors.New("kcache: CompileAll needs a context and a compute func")
	}
	out := make([]Entry, len(keys))
	var done atomic.Int64
	var panicked atomic.Pointer[computePanic]
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, k := range keys {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					panicked.CompareAndSwap(nil, &computePanic{r})
					err = errComputePanicked
				}
			}()
			if err := gctx.Err(); err != nil {
				return err
			}
			e, err := c.GetOrCompute(k, func() (Entry, error) { return compute(gctx, i) })
			if err != nil {
				return fmt.Errorf("kcache: entry %d (%s): %w", i, k.short(), err)
			}
			out[i] = e
			done.Add(1)
			return nil
		})
	}
	err := g.Wait()
	if p := panicked.Load(); p != nil {
		panic(p.value)
	}
	if err != nil {
		return out, err
	}
	if done.Load() < int64(len(keys)) {
		// No compute failed, but ctx ended before every key was started.
		return out, context.Cause(ctx)
	}
	return out, nil
}

// errComputePanicked cancels the other computes of a CompileAll after one
// panicked; CompileAll then panics with that compute's value.
var errComputePanicked = errors.New("kcache: a compute panicked")
