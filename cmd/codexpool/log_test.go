package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestNewLogger: off a terminal, auto and json write one JSON object per line, text writes
// tint's plain text; the level filters; bad values are refused.
func TestNewLogger(t *testing.T) {
	tests := []struct {
		name, level, format string
		json                bool
	}{
		{"auto off a terminal is JSON", "info", "auto", true},
		{"json", "info", "json", true},
		{"text is tint without colour off a terminal", "info", "text", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			log, err := newLogger(&b, tc.level, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("hidden")
			log.Info("generation", "request_id", "r1", "code", "ok", "duration", 1500*time.Millisecond,
				slog.Group("upstream", "ttft", 250*time.Millisecond))
			out := b.String()
			if strings.Contains(out, "hidden") {
				t.Errorf("debug line written at level info: %q", out)
			}
			var m map[string]any
			isJSON := json.Unmarshal([]byte(strings.TrimSpace(out)), &m) == nil
			if isJSON != tc.json {
				t.Errorf("output %q: JSON = %t, want %t", out, isJSON, tc.json)
			}
			if !strings.Contains(out, "r1") || strings.Contains(out, "\x1b[") {
				t.Errorf("output %q: want the fields and no colour codes off a terminal", out)
			}
			if isJSON && (m["duration"] != "1.5s" || m["upstream"].(map[string]any)["ttft"] != "250ms") {
				t.Errorf("JSON %q: durations %v and %v, want \"1.5s\" and \"250ms\" (with their unit)", out, m["duration"], m["upstream"])
			}
			if !isJSON && (!strings.Contains(out, "1.5s") || !strings.Contains(out, "250ms")) {
				t.Errorf("text %q: want the durations with their unit", out)
			}
		})
	}
	if _, err := newLogger(&bytes.Buffer{}, "loud", "json"); err == nil {
		t.Error("level loud accepted")
	}
	if _, err := newLogger(&bytes.Buffer{}, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
