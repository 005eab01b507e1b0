package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/bench"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// soakDuration is CODEXPOOL_SOAK (a Go duration, e.g. "3m"); 15s by default, for CI.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("CODEXPOOL_SOAK")
	if v == "" {
		return 15 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("CODEXPOOL_SOAK=%q: want a positive Go duration", v)
	}
	return d
}

// soakKind is one kind of traffic and the outcomes it may have.
type soakKind struct {
	name    string
	weight  int
	payload func(i int) []byte
	hdr     nats.Header
	stream  bool
	want    []string // kind() outcomes allowed
}

// TestSoak runs mixed good, bad and faulty traffic against 2 workers for CODEXPOOL_SOAK (15s by
// default), sampling the workers' RSS and sockets. Neither the workers nor the binary expose a
// goroutine count, so leaks show as RSS growth and sockets left open (worker pool vs origin).
// It fails on silent loss (a client timeout), an unexpected outcome, RSS growth beyond a
// tolerance, or sockets and in-flight counts that do not settle.
func TestSoak(t *testing.T) {
	t.Parallel()
	dur := soakDuration(t)
	c := newCluster(t, codextest.Options{Words: 5, Latency: 100 * time.Millisecond})
	env := []string{"CODEXPOOL_IDLE_TIMEOUT=2s", "CODEXPOOL_CONNECT_TIMEOUT=2s", "CODEXPOOL_LOG_LEVEL=warn"}
	workers := []*proc{c.startWorker("soak1", env...), c.startWorker("soak2", env...)}

	fault := []string{"drop", "failed", "error", "error:429", "error_nostatus", "bad_json", "binary", "incomplete"}
	kinds := []soakKind{
		{name: "good", weight: 40, payload: func(i int) []byte { return request(fmt.Sprintf("soak %d", i), nil) }, want: []string{"success"}},
		{name: "good stream", weight: 15, stream: true, payload: func(i int) []byte { return request(fmt.Sprintf("soak stream %d", i), nil) }, want: []string{"success"}},
		{name: "bad input", weight: 15, payload: func(int) []byte { return []byte(`{"input":5}`) }, want: []string{"400 invalid_request"}},
		{name: "origin fault", weight: 20, payload: func(i int) []byte {
			return request("soak fault", md("sim_fault", fault[i%len(fault)]))
		}, want: []string{"502 upstream_error", "500 upstream_error", "429 upstream_rate_limited"}},
		{name: "stall", weight: 5, payload: func(int) []byte { return request("soak stall", md("sim_fault", "stall")) }, want: []string{"504 upstream_timeout"}},
		{name: "deadline", weight: 5, payload: func(int) []byte { return request("soak slow", md("sim_latency_ms", "2000")) },
			hdr: nats.Header{schemas.HeaderTimeout: {"100ms"}}, want: []string{"504 upstream_timeout"}},
	}
	var wheel []int
	for k, kd := range kinds {
		for range kd.weight {
			wheel = append(wheel, k)
		}
	}

	var sent, lost, unexpected atomic.Int64
	var mu sync.Mutex
	counts := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i += 8 {
				select {
				case <-stop:
					return
				default:
				}
				kd := kinds[wheel[(i*7919)%len(wheel)]]
				sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				var err error
				if kd.stream {
					_, err = c.client.Stream(ctx, kd.payload(i), kd.hdr, func([]byte) error { return nil })
				} else {
					_, err = c.client.Generate(ctx, kd.payload(i), kd.hdr)
				}
				cancel()
				k := kind(err)
				if k == "client timeout" {
					lost.Add(1)
				} else if !slices.Contains(kd.want, k) {
					unexpected.Add(1)
					t.Errorf("%s: outcome %q (%v), want one of %v", kd.name, k, err, kd.want)
				}
				mu.Lock()
				counts[kd.name+" → "+k]++
				mu.Unlock()
			}
		}()
	}

	type sample struct {
		at            time.Duration
		rss           []int64
		open, idle    []int64
		inflight      int64
		originSockets int64
		sent          int64
	}
	var samples []sample
	every := max(time.Second, dur/20)
	start := time.Now()
	tick := time.NewTicker(every)
	for time.Since(start) < dur {
		<-tick.C
		s := sample{at: time.Since(start).Round(time.Second), sent: sent.Load(), originSockets: c.sim.Stats().OpenSockets}
		for _, w := range workers {
			rss := bench.RSS(w.cmd.Process.Pid) / 1024
			if rss == 0 {
				t.Fatalf("worker %s: no resident set size in /proc", w.id)
			}
			st, _ := workerStatsOf(c.nc, w.id)
			s.rss = append(s.rss, rss)
			s.open = append(s.open, st.Upstream.Open)
			s.idle = append(s.idle, int64(st.Upstream.Idle))
			s.inflight += st.Inflight
		}
		samples = append(samples, s)
		t.Logf("soak t=%-5s sent=%-6d rss_kb=%v upstream_open=%v idle=%v inflight=%d origin_sockets=%d",
			s.at, s.sent, s.rss, s.open, s.idle, s.inflight, s.originSockets)
	}
	tick.Stop()
	close(stop)
	wg.Wait()

	mu.Lock()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-45s %d\n", k, counts[k])
	}
	mu.Unlock()
	t.Logf("soak of %s: %d requests, %d lost, %d unexpected\n%s", dur, sent.Load(), lost.Load(), unexpected.Load(), b.String())
	if lost.Load() != 0 {
		t.Errorf("%d requests got no answer", lost.Load())
	}

	// Nothing in flight, and the origin's sockets settle to what the workers' pools hold.
	var settled string
	waitCond(t, 30*time.Second, "workers idle, origin sockets = pooled sockets", func() bool {
		var open, idle int64
		for _, w := range workers {
			st, ok := workerStatsOf(c.nc, w.id)
			if !ok || st.Inflight != 0 {
				return false
			}
			open += st.Upstream.Open
			idle += int64(st.Upstream.Idle)
		}
		settled = fmt.Sprintf("worker sockets open %d (idle %d), origin sockets %d", open, idle, c.sim.Stats().OpenSockets)
		return open == idle && c.sim.Stats().OpenSockets == open
	})
	t.Logf("after the soak: %s", settled)

	// RSS trend: the median of the last quarter against the median of the second quarter (the
	// first is warm-up: the race detector and the pools grow early).
	if len(samples) >= 8 {
		q := len(samples) / 4
		for wi, w := range workers {
			med := func(ss []sample) int64 {
				var v []int64
				for _, s := range ss {
					v = append(v, s.rss[wi])
				}
				slices.Sort(v)
				return v[len(v)/2]
			}
			early, late := med(samples[q:2*q]), med(samples[len(samples)-q:])
			t.Logf("%s RSS: first sample %d KiB, early median %d KiB, late median %d KiB, last %d KiB",
				w.id, samples[0].rss[wi], early, late, samples[len(samples)-1].rss[wi])
			if late > early*3/2+32<<10 {
				t.Errorf("%s RSS grew from %d KiB to %d KiB", w.id, early, late)
			}
		}
	}
	for _, w := range workers {
		w.stop(t, 30*time.Second)
	}
	if err := c.sim.WaitIdle(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("origin still has %d sockets after the workers stopped", c.sim.Stats().OpenSockets)
	}
}
