package array

import (
	"sync"

	"gocompile/internal/logs"
	"gocompile/kcache"
)

// Artifacts is where a compiled function's artifacts (fusion layouts, GPU
// kernels, autotuning results) are kept, and the function they are for:
// cache entries record it and the artifact's name, for listings
// (cmd/kcache), and logs name it. A nil *Artifacts is the process-wide
// artifact cache, for no function in particular (the kernels of eager
// ops).
type Artifacts struct {
	cache    *kcache.Cache
	function string
}

// NewArtifacts keeps the artifacts of function in cache (nil: the
// process-wide one).
func NewArtifacts(cache *kcache.Cache, function string) *Artifacts {
	return &Artifacts{cache: cache, function: function}
}

// Cache is the cache the artifacts go to.
func (a *Artifacts) Cache() *kcache.Cache {
	if a == nil || a.cache == nil {
		return artifactCache()
	}
	return a.cache
}

// Function is the function the artifacts are for, or "".
func (a *Artifacts) Function() string {
	if a == nil {
		return ""
	}
	return a.function
}

// LogArgs are args preceded by the attribute that names the function in a
// log, if any.
func (a *Artifacts) LogArgs(args ...any) []any {
	if fn := a.Function(); fn != "" {
		return append([]any{"function", fn}, args...)
	}
	return args
}

// Label returns e recording the function and the artifact's name.
func (a *Artifacts) Label(e kcache.Entry, name string) kcache.Entry {
	e.Func, e.Name = a.Function(), name
	return e
}

// artifactCache is the process-wide artifact cache (GOCOMPILE_CACHE_DIR),
// opened on first use; its logs go where gocompile's do. Tests point it
// elsewhere.
var artifactCache = sync.OnceValue(func() *kcache.Cache { return kcache.Open("", kcache.WithLogger(logs.CacheLogger)) })

// ArtifactCache is the process-wide artifact cache.
func ArtifactCache() *kcache.Cache { return artifactCache() }
