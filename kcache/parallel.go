package kcache

import (
	"context"
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
// returns that error with the entries it has; the others are zero.
func (c *Cache) CompileAll(ctx context.Context, keys []Key, compute func(ctx context.Context, i int) (Entry, error)) ([]Entry, error) {
	out := make([]Entry, len(keys))
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, k := range keys {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
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
	if err := g.Wait(); err != nil {
		return out, err
	}
	if done.Load() < int64(len(keys)) {
		// No compute failed, but ctx ended before every key was started.
		return out, context.Cause(ctx)
	}
	return out, nil
}
