package queue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
)

func TestMicroDiscovery(t *testing.T) {
	ns := startServer(t)
	s := newService(t, ns, Config{
		WorkerID: "w-disc",
		Version:  "1.2.3",
		WorkerStats: func() schemas.WorkerStats {
			return schemas.WorkerStats{Gate: schemas.GateStats{SpacingMS: 7}}
		},
	}, instant)
	nc := connect(t, ns)

	var ping micro.Ping
	decode(t, request(t, nc, "$SRV.PING.codexpool", "", nil).Data, &ping)
	if ping.Name != ServiceName || ping.Version != "1.2.3" || ping.Metadata["worker"] != "w-disc" {
		t.Errorf("PING = %+v, want name codexpool, version 1.2.3, metadata worker w-disc", ping)
	}

	var info micro.Info
	decode(t, request(t, nc, "$SRV.INFO.codexpool", "", nil).Data, &info)
	if len(info.Endpoints) != 2 {
		t.Fatalf("INFO endpoints = %+v, want two (generate and the worker's own)", info.Endpoints)
	}
	if ep := info.Endpoints[1]; ep.Name != "worker" || ep.Subject != "codex.generate.worker.w-disc" {
		t.Errorf("INFO second endpoint = %s on %s, want worker on codex.generate.worker.w-disc", ep.Name, ep.Subject)
	}
	ep := info.Endpoints[0]
	if ep.Name != EndpointName || ep.Subject != DefaultSubject || ep.QueueGroup != DefaultQueueGroup {
		t.Errorf("INFO endpoint = %s on %s in %s, want generate on codex.generate in codexpool", ep.Name, ep.Subject, ep.QueueGroup)
	}

	request(t, nc, DefaultSubject, goodRequest, nil)
	request(t, nc, DefaultSubject, goodRequest, nil)
	request(t, nc, DefaultSubject, `not json`, nil)
	// The service's own counters are final here (a generation counts before it replies), but
	// micro counts a request only after its handler returned, which may be just after the
	// client got a synchronous refusal: wait for micro to count the third.
	var stats micro.Stats
	testutil.WaitFor(t, 5*time.Second, "micro to count 3 requests", func() bool {
		stats = micro.Stats{}
		decode(t, request(t, nc, "$SRV.STATS.codexpool", "", nil).Data, &stats)
		return len(stats.Endpoints) == 2 && stats.Endpoints[0].NumRequests >= 3
	})
	es := stats.Endpoints[0]
	if es.NumRequests != 3 || es.NumErrors != 1 {
		t.Errorf("micro num_requests=%d num_errors=%d, want 3 and 1 (refusals are synchronous)", es.NumRequests, es.NumErrors)
	}
	var data schemas.Stats
	decode(t, es.Data, &data)
	if data.Worker != "w-disc" || data.Requests != 3 || data.Completed != 2 || data.Started != 2 || data.Inflight != 0 {
		t.Errorf("STATS data = %+v, want worker w-disc, 3 requests, 2 started and completed, 0 in flight", data.ServiceStats)
	}
	if data.Errors[schemas.CodeInvalidRequest] != 1 {
		t.Errorf("STATS data errors = %v, want invalid_request 1", data.Errors)
	}
	if data.Gate.SpacingMS != 7 {
		t.Errorf("STATS data gate.spacing_ms = %d, want 7 (merged from WorkerStats)", data.Gate.SpacingMS)
	}
	if data.LatencySum <= 0 || data.LatencyAvg <= 0 {
		t.Errorf("latency sum/avg = %v/%v, want positive", data.LatencySum, data.LatencyAvg)
	}
	_ = s
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
