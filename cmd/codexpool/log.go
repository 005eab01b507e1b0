package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"

	"github.com/codexpool/codexpool/internal/tracing"
	"golang.org/x/term"
)

// parseLevel parses debug, info, warn or error.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

// newLogger returns the process logger: tint's colour text on a terminal (format "auto" or
// "text"), JSON otherwise (format "auto" off a terminal, or "json"). Durations are written as Go
// duration strings with their unit ("1.5s", "250ms") in both, never as bare nanoseconds.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	// Every handler adds the trace_id and span_id of a record logged with a request's context.
	traced := func(h slog.Handler) *slog.Logger { return slog.New(tracing.LogHandler(h)) }
	switch format {
	case "json":
	case "text":
		return traced(tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: !tty})), nil
	case "auto", "":
		if tty {
			return traced(tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly})), nil
		}
	default:
		return nil, fmt.Errorf("unknown log format %q (want auto, text or json)", format)
	}
	return traced(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText})), nil
}

// durationText writes a duration attribute as its string ("1.5s"): slog's JSON handler would
// write nanoseconds with no unit.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
