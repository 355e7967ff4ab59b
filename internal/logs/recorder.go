package logs

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps each record as a line, the
// message and the attributes, for tests to read what was logged.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *Recorder) WithGroup(string) slog.Handler            { return r }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, b.String())
	return nil
}

// Lines is what was recorded, a line a record.
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}
