// Package guard holds the guards of compiled functions, as TorchDynamo's
// guards and automatic dynamic shapes.
//
// A compiled function keeps a Cache of entries. Each Entry was traced and
// compiled for some call and holds guards that say which calls it serves:
// for every tensor input its dtype, device, rank, contiguity and, per dim,
// either a static size or a symbol (a dynamic dim); for every scalar input
// its exact value. A call (described by a reused, allocation-free Call)
// runs the first entry whose guards pass (Cache.Lookup); on a miss,
// Cache.Plan builds the guards of the next entry and a Reason for the logs,
// the caller traces and compiles it and calls Cache.Insert.
//
// # Dynamic dims
//
// A dynamic dim accepts any size >= 2; sizes 0 and 1 stay specialised, as
// in PyTorch (a call with size 1 misses and gets its own entry). Dims that
// share a symbol must be equal at call time. Within one entry, dynamic
// dims whose sizes were equal in the example call share one symbol (duck
// sizing): a conservative guess that costs at most one extra compile when
// they later differ. The tracer adds guards while tracing: AddEquality when
// user code relied on two sizes being equal (the symbols merge),
// Specialize when it read a dynamic size as a Go int (the symbol becomes
// static).
//
// Which dims are dynamic is decided by a Policy: all of them
// (Policy.Dynamic, as dynamic=True), marked ones (Policy.Marked, as
// mark_dynamic), and, under automatic dynamic shapes (Policy.AutoDynamic,
// on in DefaultPolicy), those in which a call differed from an existing
// entry that it otherwise matched: the first compile is static, and the
// first recompile caused by a size change makes that dim dynamic.
//
// # Scalars
//
// Scalars are guarded by value, compared by their IEEE bits: a NaN scalar
// matches the same NaN (NaN == NaN for guards, unlike float comparison),
// and 0.0 and -0.0 are different values (1/x tells them apart).
//
// # Ranks above MaxRank
//
// A TensorMeta holds MaxRank dims inline; the sizes of further dims go in
// TensorMeta.Overflow (SetShape fills it without allocating) and are
// guarded exactly like the others.
//
// # Cost
//
// NewEntry compiles the guards into flat programs: a slice of expected
// tensor metadata, a slice of scalar bits, and one instruction per dim
// (equal to a constant, at least 2, or equal to an earlier dim). Check runs
// them without allocating and without a symbol table: a symbol's later
// dims are compared with its first dim directly. With four tensors of rank
// 2-3 it takes a few tens of nanoseconds. Lookup reads the entry list
// through an atomic pointer (copy on write on Insert), without locks.
package guard
