package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EOneLogLinePerRequest: at the default level a worker writes exactly one line per request,
// whether it succeeded or failed (issue 27: a failure used to log two), and that line gives the
// duration with its unit.
func TestE2EOneLogLinePerRequest(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 3})
	w := c.startWorker("w1", "CODEXPOOL_LOG_LEVEL=info")
	ids := map[string]map[string]any{
		"req-ok":     nil,
		"req-failed": {"metadata": map[string]string{"sim_fault": "failed"}},
		"req-429":    {"metadata": map[string]string{"sim_fault": "error:429"}},
	}
	for id, extra := range ids {
		hdr := nats.Header{}
		hdr.Set(schemas.HeaderRequestID, id)
		_, err := c.client.Generate(ctxT(t, 30*time.Second), request("Say hello", extra), hdr)
		if (err == nil) != (id == "req-ok") {
			t.Fatalf("%s: error %v", id, err)
		}
	}
	w.stop(t, 30*time.Second) // every line is written once the process has exited
	lines := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(w.out.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if id, _ := m["request_id"].(string); id != "" {
			lines[id] = append(lines[id], m)
		}
	}
	for id := range ids {
		got := lines[id]
		if len(got) != 1 {
			t.Errorf("%s: %d log lines at info, want exactly 1: %v", id, len(got), got)
			continue
		}
		if d, _ := got[0]["duration"].(string); d == "" || !strings.ContainsAny(d[len(d)-1:], "sµm") {
			t.Errorf("%s: duration %v, want a string with its unit", id, got[0]["duration"])
		}
	}
}
