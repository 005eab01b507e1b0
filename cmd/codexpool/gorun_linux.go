package main

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// followGoRun makes a codexpool started by `go run` end with it. `go run` does not pass SIGTERM
// on to the program it built, so `go run ./cmd/codexpool worker &` and then `kill %1` used to
// leave the worker running, holding its ports, and the rerun failed with "address already in
// use". A binary run from go's build cache (a "go-build" folder) asks the kernel for SIGTERM when
// its parent dies, and so shuts down the usual graceful way; an installed codexpool never
// watches its parent. Call it after the signal handler is set.
func followGoRun() {
	exe, err := os.Executable()
	if err != nil || !underGoRun(exe) {
		return
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0)
	if os.Getppid() == 1 { // the parent died before the request took effect: adopted by init
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}
}

// underGoRun reports whether exe lies in a folder `go run` builds into.
func underGoRun(exe string) bool {
	return strings.Contains(filepath.ToSlash(exe), "/go-build")
}
