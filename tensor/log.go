package tensor

import (
	"log/slog"

	"gocompile/internal/logs"
)

// SetLogger directs gocompile's logs to l: what GOCOMPILE_LOGS turns on,
// and the warnings logged whatever it says (a function that reached its
// recompile limit, a kernel that failed to build, a cache directory that
// cannot be written). A nil l restores the default, slog.Default() at the
// time of each log. SetLogger may be called at any time, concurrently
// with compiled functions.
//
// Multi-line artifacts (graphs, guards, fusion plans, generated kernel
// sources) are one Info record each, holding the text in an attribute
// (graph, guards, plan, source) for handlers to encode as they do any
// string. Through log/slog's built-in handler, which writes through
// package log for a person to read (slog.Default() until slog.SetDefault
// installs another), the record's header line is followed by the text
// itself, newlines and all.
func SetLogger(l *slog.Logger) { logs.SetLogger(l) }
