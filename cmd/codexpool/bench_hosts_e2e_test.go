package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestBenchHosts runs `codexpool bench --hosts 2 --delay 20ms` with the real binary: every
// request is answered by workers on two simulated hosts, each answer pays the hosts' distance
// (a request and its reply cross a link once each way, the handshake once more: at least 4 × 20
// ms over the origin's 50 ms), and the namespaces are gone afterwards.
func TestBenchHosts(t *testing.T) {
	// In CI (root, iproute2 installed by the example steps) a missing piece fails: it never skips.
	skip := t.Skip
	if os.Getenv("CI") == "true" {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("needs iproute2's ip")
	}
	cmd := exec.Command(binPath, "bench", "--hosts", "2", "--delay", "20ms", "--workers", "2", "--reuse=false",
		"--requests", "10", "--concurrency", "5", "--latency", "50ms", "--json", "--quiet")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench --hosts: %v\n%s\n%s", err, out, stderr.String())
	}
	var results []struct {
		OK      int     `json:"ok"`
		Failed  int     `json:"failed"`
		Hosts   int     `json:"hosts"`
		DelayMS float64 `json:"host_delay_ms"`
		P50     float64 `json:"p50_ms"`
	}
	if err := json.Unmarshal(out, &results); err != nil || len(results) != 1 {
		t.Fatalf("bench --json: %v, %d rows\n%s", err, len(results), out)
	}
	r := results[0]
	if r.OK != 10 || r.Failed != 0 || r.Hosts != 2 || r.DelayMS != 20 {
		t.Errorf("result %+v, want 10 ok on 2 hosts 20 ms away", r)
	}
	if r.P50 < 50+4*20 {
		t.Errorf("p50 %.1f ms, want >= 130 ms (the origin's 50 ms and four crossings of a 20 ms link)", r.P50)
	}
	hub := regexp.MustCompile(`namespaces (cxp\S+-hub)`).FindStringSubmatch(stderr.String())
	if hub == nil {
		t.Fatalf("bench did not name its namespaces:\n%s", stderr.String())
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	if prefix := strings.TrimSuffix(hub[1], "-hub"); strings.Contains(string(list), prefix) {
		t.Errorf("namespaces %s* left behind:\n%s", prefix, list)
	}
}
