package kcache

import (
	"log/slog"
	"os"
	"strings"
	"sync"
)

// logOn reports whether GOCOMPILE_LOGS, a comma-separated list of
// categories, names category or "all".
func logOn(category string) bool {
	for _, c := range strings.Split(os.Getenv("GOCOMPILE_LOGS"), ",") {
		if c = strings.TrimSpace(c); c == category || c == "all" {
			return true
		}
	}
	return false
}

// logger writes a cache's logs: events under GOCOMPILE_LOGS=cache, and
// warnings once per cause whatever the setting, so that a broken cache
// directory is reported without flooding the log.
type logger struct {
	l  *slog.Logger // nil: slog.Default()
	on bool         // GOCOMPILE_LOGS names cache; read once, as hits are hot

	mu     sync.Mutex
	warned map[string]bool
}

func (l *logger) slog() *slog.Logger {
	if l.l != nil {
		return l.l
	}
	return slog.Default()
}

// event logs msg when GOCOMPILE_LOGS names cache.
func (l *logger) event(msg string, args ...any) {
	if l.on {
		l.slog().Info(msg, args...)
	}
}

// warnOnce logs msg as a warning the first time it is called with cause,
// and as an event after that.
func (l *logger) warnOnce(cause, msg string, args ...any) {
	l.mu.Lock()
	first := !l.warned[cause]
	if first {
		if l.warned == nil {
			l.warned = make(map[string]bool)
		}
		l.warned[cause] = true
	}
	l.mu.Unlock()
	if first {
		l.slog().Warn(msg, args...)
	} else {
		l.event(msg, args...)
	}
}
