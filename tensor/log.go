package tensor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// gocompile logs through log/slog: the categories GOCOMPILE_LOGS names
// (logOn), and warnings whatever it says. Every record goes through
// currentLogger, so that SetLogger directs all of them, the artifact
// caches' included (cacheLogger).

// setLogger holds the logger SetLogger installed; nil: slog.Default().
var setLogger atomic.Pointer[slog.Logger]

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
func SetLogger(l *slog.Logger) { setLogger.Store(l) }

// currentLogger is the logger gocompile logs through now.
func currentLogger() *slog.Logger {
	if l := setLogger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// logOn reports whether GOCOMPILE_LOGS (a comma-separated list: graph,
// guards, recompiles, breaks, fusion, output_code, cache, cudagraphs,
// autotune, or all) names category. Only compile paths ask.
func logOn(category string) bool {
	for _, c := range strings.Split(os.Getenv("GOCOMPILE_LOGS"), ",") {
		if c = strings.TrimSpace(c); c == category || c == "all" {
			return true
		}
	}
	return false
}

func logInfo(msg string, args ...any) { logRecord(slog.LevelInfo, msg, "", "", args) }
func logWarn(msg string, args ...any) { logRecord(slog.LevelWarn, msg, "", "", args) }

// logText logs a multi-line artifact, text, as an Info record of msg and
// args whose attribute key holds the text (see SetLogger).
func logText(msg, key, text string, args ...any) {
	logRecord(slog.LevelInfo, msg, key, text, args)
}

// logRecord logs one record through currentLogger, attributed to the
// caller of logInfo, logWarn or logText, as slog's own functions would be.
func logRecord(level slog.Level, msg, key, text string, args []any) {
	ctx := context.Background()
	h := currentLogger().Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, logRecord, logInfo…
	text = strings.TrimRight(text, "\n")
	var r slog.Record
	if key != "" && builtinHandler(h) {
		// The built-in handler writes the message as is, then the
		// attributes: the header goes in the message so that the text
		// comes after it rather than before the attributes.
		r = slog.NewRecord(time.Now(), level, msg+formatAttrs(args)+"\n"+text, pcs[0])
	} else {
		r = slog.NewRecord(time.Now(), level, msg, pcs[0])
		r.Add(args...)
		if key != "" {
			r.AddAttrs(slog.String(key, text))
		}
	}
	_ = h.Handle(ctx, r) // as slog.Logger does: a handler's error has nowhere to go
}

// builtinHandler reports whether h is log/slog's own default handler,
// which writes lines for people through package log and which log/slog
// does not export to compare with.
func builtinHandler(h slog.Handler) bool {
	return fmt.Sprintf("%T", h) == "*slog.defaultHandler"
}

// formatAttrs formats args as the built-in handler formats attributes:
// " key=value" each, quoted where needed.
func formatAttrs(args []any) string {
	if len(args) == 0 {
		return ""
	}
	var b strings.Builder
	th := slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}})
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, "", 0)
	r.Add(args...)
	_ = th.Handle(context.Background(), r) // writes to a strings.Builder: no error
	return " " + strings.TrimSuffix(b.String(), "\n")
}

// cacheLogger is the logger of the artifact caches tensor opens: they are
// opened once, and it sends each record to currentLogger at the time.
var cacheLogger = slog.New(forwardHandler{})

// forwardHandler hands records to currentLogger's handler, with the
// attributes and groups it was given (by With and WithGroup) applied.
type forwardHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (f forwardHandler) target() slog.Handler {
	h := currentLogger().Handler()
	for _, w := range f.with {
		h = w(h)
	}
	return h
}

func (f forwardHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return f.target().Enabled(ctx, l)
}

func (f forwardHandler) Handle(ctx context.Context, r slog.Record) error {
	return f.target().Handle(ctx, r)
}

func (f forwardHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return forwardHandler{append(slices.Clip(f.with), func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })}
}

func (f forwardHandler) WithGroup(name string) slog.Handler {
	return forwardHandler{append(slices.Clip(f.with), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}
