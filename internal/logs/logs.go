// Package logs is how gocompile's packages log: the categories
// GOCOMPILE_LOGS turns on (On), and the records themselves, which all go
// through the logger tensor.SetLogger installs (Current).
package logs

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
// (On), and warnings whatever it says. Every record goes through Current,
// so that SetLogger directs all of them, the artifact caches' included
// (CacheLogger).

// setLogger holds the logger SetLogger installed; nil: slog.Default().
var setLogger atomic.Pointer[slog.Logger]

// SetLogger directs gocompile's logs to l; nil restores slog.Default()
// at the time of each log. Package tensor's SetLogger documents it.
func SetLogger(l *slog.Logger) { setLogger.Store(l) }

// Current is the logger gocompile logs through now.
func Current() *slog.Logger {
	if l := setLogger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// On reports whether GOCOMPILE_LOGS (a comma-separated list: graph,
// guards, recompiles, breaks, fusion, output_code, cache, cudagraphs,
// autotune, or all) names category. Only compile paths ask.
func On(category string) bool {
	for _, c := range strings.Split(os.Getenv("GOCOMPILE_LOGS"), ",") {
		if c = strings.TrimSpace(c); c == category || c == "all" {
			return true
		}
	}
	return false
}

// Info logs an Info record of msg and args.
func Info(msg string, args ...any) { record(3, slog.LevelInfo, msg, "", "", args) }

// Warn logs a Warn record of msg and args.
func Warn(msg string, args ...any) { record(3, slog.LevelWarn, msg, "", "", args) }

// InfoForCaller logs as Info does, attributed to the caller of the
// function that calls it (a helper that logs for its callers).
func InfoForCaller(msg string, args ...any) { record(4, slog.LevelInfo, msg, "", "", args) }

// Text logs a multi-line artifact, text, as an Info record of msg and
// args whose attribute key holds the text. Through log/slog's built-in
// handler, which writes lines for a person to read, the record's header
// line is followed by the text itself, newlines and all.
func Text(msg, key, text string, args ...any) {
	record(3, slog.LevelInfo, msg, key, text, args)
}

// record logs one record through Current, attributed to the function
// skip frames up (runtime.Callers counting itself as 0, then record), as
// slog's own functions would be.
func record(skip int, level slog.Level, msg, key, text string, args []any) {
	ctx := context.Background()
	h := Current().Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(skip, pcs[:])
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

// CacheLogger is the logger of the artifact caches gocompile opens: they
// are opened once, and it sends each record to Current at the time.
var CacheLogger = slog.New(forwardHandler{})

// forwardHandler hands records to Current's handler, with the
// attributes and groups it was given (by With and WithGroup) applied.
type forwardHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (f forwardHandler) target() slog.Handler {
	h := Current().Handler()
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
