//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EGoRunChildEndsWithItsParent: a codexpool that runs from go's build cache (as `go run`
// starts it) shuts down gracefully when its parent dies, as `kill` of a backgrounded `go run`
// does (issue 27 point 6: the worker stayed, holding its ports); an installed binary does not
// watch its parent.
func TestE2EGoRunChildEndsWithItsParent(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	tests := []struct {
		name     string
		dir      string // where the binary runs from, under a temporary folder
		wantExit bool
	}{
		{name: "under go run", dir: "go-build1234/b001/exe", wantExit: true},
		{name: "installed", dir: "bin", wantExit: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), tt.dir, "codexpool")
			copyFile(t, binPath, bin)
			out := filepath.Join(t.TempDir(), "sim.out")
			// The shell plays `go run`: it starts the program and waits; killing it orphans the program.
			sh := exec.Command("sh", "-c", fmt.Sprintf(`%q sim --addr 127.0.0.1:0 >%q 2>&1 & echo $!; wait`, bin, out))
			stdout, _ := sh.StdoutPipe()
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			pid, perr := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || perr != nil {
				t.Fatalf("child pid: %q %v %v", line, err, perr)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			waitFor(t, 30*time.Second, "the simulator is listening", func() bool { return controlURL(readFile(out)) != "" })
			_ = sh.Process.Kill()
			_ = sh.Wait()
			if !tt.wantExit {
				// Still serving after its parent is gone: its control route answers.
				if resp, err := http.Get(controlURL(readFile(out))); err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("an installed codexpool stopped serving with its parent: %v %v", resp, err)
				} else {
					resp.Body.Close()
				}
				return
			}
			waitFor(t, 10*time.Second, "the orphan exits", func() bool { return !alive(pid) })
			if !strings.Contains(readFile(out), "final stats") {
				t.Errorf("the orphan did not shut down gracefully (no final stats):\n%s", readFile(out))
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// controlURL is the stats URL the simulator printed at start.
func controlURL(out string) string {
	_, rest, _ := strings.Cut(out, "codexpool sim: control ")
	url, _, _ := strings.Cut(rest, "\n")
	return url
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// alive reports whether pid runs (a zombie waiting for its reaper counts as gone).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
