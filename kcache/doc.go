// Package kcache caches compiled artifacts, such as GPU kernels compiled by
// NVRTC and compiled programs, in memory and on disk, so that a process
// compiles a kernel once and later processes not at all.
//
// Entries are addressed by a Key, a SHA-256 hash of everything that changes
// the artifact: for a kernel its source, the code generator's and NVRTC's
// versions, the device architecture and the compiler options (KernelSpec);
// for a program its normalised graph, guards, mode and device
// (ProgramSpec). A changed input therefore names a different entry, and the
// cache never has to decide whether an entry is stale.
//
// A Cache keeps recently used entries in memory, bounded by size, and all
// entries in a directory, by default gocompile in os.UserCacheDir,
// overridden by $GOCOMPILE_CACHE_DIR or by the directory given to Open.
// Several processes may share the directory: files are written to a
// temporary name and renamed into place, each carries its format version
// and a checksum, and a file that is truncated, corrupt, of another
// version or unreadable is a miss that gets rebuilt, never an error or a
// crash. The directory is kept under a size limit by removing the least
// recently used files, by modification time, which hits update. When the
// directory cannot be written, the cache logs one warning and keeps new
// entries in memory only.
//
// GetOrCompute is the usual entry point: it returns an entry from memory
// or disk, or computes and stores it, running one computation for all the
// goroutines that miss the same key at once. CompileAll does the same for
// many keys in parallel.
//
// The cache does not interpret what it stores: a Kernel holds the CUBIN,
// PTX and launch metadata of a module, and a Program an opaque payload
// whose format its kind names; either may say what it was made for (Func
// and Name: the compiled function and the kernel), for people listing the
// cache. Entries are encoded with msgp
// (github.com/tinylib/msgp); the generated code is in entry_gen.go.
//
// Setting GOCOMPILE_LOGS=cache (or all) logs every hit, miss, write and
// eviction through log/slog; Stats returns the counts.
//
// The kcache command (gocompile/cmd/kcache) lists, prunes and clears a
// cache directory.
package kcache
