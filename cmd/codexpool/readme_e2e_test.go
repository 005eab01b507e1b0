//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.yaml.in/yaml/v3"
)

// readmePath is the page TestReadmeCommands follows, relative to this package.
const readmePath = "../../README.md"

// readmeBlock is one fenced block of README.md and how the test treats it, from the
// `<!-- readme: HOW ARG -->` comment on the line before it (no comment: run).
type readmeBlock struct {
	line int    // README line of the opening fence
	lang string // the fence's info string: sh, yaml, toml, json
	body string
	how  string // run, background, skip or file
	arg  string // background: the output that says it is ready; skip: why and what covers it; file: where to write it
}

var (
	readmeDirective = regexp.MustCompile(`^<!-- readme: (run|background|skip|file)(?: (.*?))? -->$`)
	// readmeCoveredBy is what a skip's reason must name: the test or CI step that runs the block.
	readmeCoveredBy = regexp.MustCompile(`Test[A-Z]\w+|\.ci/run|ci\.sh`)
	readmeTestName  = regexp.MustCompile(`Test[A-Z]\w+`)
)

// parseReadme returns README's fenced blocks, or an error for any code it would leave untested:
// an indented code block, a fence in another language, a directive that fits no block, a skip
// that names nothing covering it.
func parseReadme(text string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	var pending *readmeBlock // a directive waiting for its block on the next line
	prevBlank := true
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: n, lang: strings.TrimPrefix(line, "```"), how: "run"}
			if pending != nil {
				cur.how, cur.arg, pending = pending.how, pending.arg, nil
			}
		case pending != nil:
			return nil, fmt.Errorf("line %d: a readme comment must come right before its block", pending.line)
		case strings.HasPrefix(line, "<!-- readme:"):
			m := readmeDirective.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: a readme comment this test does not understand: %s", n, line)
			}
			pending = &readmeBlock{line: n, how: m[1], arg: m[2]}
		case prevBlank && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("line %d: an indented code block; fence it (```sh) so that this test runs it", n)
		}
		prevBlank = strings.TrimSpace(line) == ""
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: a block that never closes", cur.line)
	}
	for _, b := range blocks {
		if err := b.check(); err != nil {
			return nil, fmt.Errorf("README.md line %d: %w", b.line, err)
		}
	}
	return blocks, nil
}

// check refuses a block the test cannot account for.
func (b readmeBlock) check() error {
	switch {
	case b.lang == "sh" && b.how == "file":
		return errors.New("a sh block is run, not written to a file")
	case b.lang == "sh" && b.how == "skip" && !readmeCoveredBy.MatchString(b.arg):
		return fmt.Errorf("skipped without naming the test or CI step that covers it: %q", b.arg)
	case b.lang == "sh" && b.how == "background" && b.arg == "":
		return errors.New(`a background block needs "until=TEXT", the output that says it is ready`)
	case b.lang == "sh":
		return nil
	case b.lang == "yaml" || b.lang == "toml" || b.lang == "json":
		if b.how != "file" && b.how != "run" {
			return fmt.Errorf("a %s block is checked (parsed, or written with `file PATH`), not %s", b.lang, b.how)
		}
		return parseConfigBlock(b.lang, b.body)
	default:
		return fmt.Errorf("a block in %q that this test does not run: use sh (run), or yaml, toml or json (parsed)", b.lang)
	}
}

// tomlLine is what the Codex CLI config in README may hold: comments, [tables], key = "string".
var tomlLine = regexp.MustCompile(`^(\s*(#.*)?|\[[A-Za-z0-9_.]+\]|[A-Za-z0-9_]+ = "[^"]*"\s*(#.*)?)$`)

// parseConfigBlock parses a config block; TOML only as far as README's Codex CLI config needs
// (the module has no TOML parser: TestE2ECodexCLI runs the CLI with the same settings).
func parseConfigBlock(lang, body string) error {
	switch lang {
	case "json":
		if !json.Valid([]byte(body)) {
			return errors.New("not valid JSON")
		}
	case "yaml":
		var v any
		if err := yaml.Unmarshal([]byte(body), &v); err != nil {
			return fmt.Errorf("not valid YAML: %w", err)
		}
	case "toml":
		for i, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			if !tomlLine.MatchString(l) {
				return fmt.Errorf("TOML line %d %q: not a table, a key = \"string\" or a comment", i+1, l)
			}
		}
	}
	return nil
}

// TestReadmeBlocksAreAccountedFor: every block of README.md is run, parsed or skipped with the
// name of what covers it, and the checks refuse the blocks they must (so a README that gains
// an untested block fails).
func TestReadmeBlocksAreAccountedFor(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseReadme(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	tests := testNamesInModule(t)
	for _, b := range blocks {
		for _, name := range readmeTestName.FindAllString(b.arg, -1) {
			if !tests[name] {
				t.Errorf("README.md line %d: skipped as covered by %s, which is no test of this module", b.line, name)
			}
		}
	}
	bad := []struct {
		name, text, want string
	}{
		{"python block", "```python\nprint(1)\n```\n", "does not run"},
		{"no language", "```\nls\n```\n", "does not run"},
		{"indented code", "Run:\n\n    codexpool demo\n", "indented code block"},
		{"skip without cover", "<!-- readme: skip too slow -->\n```sh\nls\n```\n", "without naming"},
		{"background without readiness", "<!-- readme: background -->\n```sh\nls\n```\n", "until=TEXT"},
		{"stray comment", "<!-- readme: skip TestX -->\n\ntext\n```sh\nls\n```\n", "right before its block"},
		{"broken yaml", "```yaml\na: [1\n```\n", "not valid YAML"},
		{"broken toml", "```toml\nmodel = gpt\n```\n", "TOML line 1"},
		{"unclosed", "```sh\nls\n", "never closes"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseReadme(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseReadme: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// testNamesInModule is the set of Test functions declared in the module's _test.go files.
func testNamesInModule(t *testing.T) map[string]bool {
	names := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestReadmeCommands follows README.md top to bottom as a newcomer would: every sh block runs in
// order, in one shell state carried from block to block (variables, the directory), with a fresh
// HOME; a background block is a server started in a terminal of its own, waited on until its
// output says it is ready, and stopped at the end; a file block is written where it says. It runs
// in a network namespace of its own that has only loopback, so README's fixed ports (4222, 8080,
// 8090) are free and no block can reach the internet. Needs root (CI runs as root).
func TestReadmeCommands(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseReadme(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	// Outside CI a machine may lack what the page needs; CI must have it (.ci/run installs curl).
	cannot := t.Skipf
	if os.Getenv("CI") != "" {
		cannot = t.Fatalf
	}
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			cannot("README's commands need %s: %v", tool, err)
		}
	}
	runtime.LockOSThread() // never unlocked: the thread, alone in the namespace, ends with the test
	if err := enterLoopbackOnlyNetns(); err != nil {
		cannot("needs a network namespace of its own (root; CI runs it): %v", err)
	}
	sh := newReadmeShell(t)
	for _, b := range blocks {
		switch {
		case b.how == "skip":
			t.Logf("README.md line %d: skipped: %s", b.line, b.arg)
		case b.how == "file":
			sh.writeFile(b)
		case b.lang != "sh":
			// a config block that is only parsed (parseReadme did)
		case b.how == "background":
			sh.background(b)
		default:
			sh.run(b)
		}
	}
}

// enterLoopbackOnlyNetns moves the calling (locked) thread into a new network namespace and
// brings its loopback interface up; processes started from this thread inherit it.
func enterLoopbackOnlyNetns() error {
	if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then the flags
	copy(ifr[:], "lo")
	binary.NativeEndian.PutUint16(ifr[16:], syscall.IFF_UP|syscall.IFF_LOOPBACK|syscall.IFF_RUNNING)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return fmt.Errorf("bring lo up: %w", errno)
	}
	return nil
}

// readmeShell carries a shell's state (exported variables, the directory) from block to block.
type readmeShell struct {
	t           *testing.T
	dir         string   // the test's files: state, blocks
	home        string   // HOME of every block
	env         []string // the environment the first block starts from
	state, cwd  string   // files: `export -p` after the last block; its directory
	n           int      // blocks run so far
	servers     []*readmeServer
	serversDone sync.WaitGroup
}

// readmeServer is a background block's shell and its output.
type readmeServer struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   strings.Builder
	ready chan struct{} // closed when out first holds the readiness text
	ended chan struct{} // closed when the output ends
}

func newReadmeShell(t *testing.T) *readmeShell {
	dir, home := t.TempDir(), t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	sh := &readmeShell{t: t, dir: dir, home: home, state: filepath.Join(dir, "state"), cwd: filepath.Join(dir, "cwd")}
	sh.env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "LANG=C.UTF-8", "TMPDIR=" + t.TempDir(),
		// the module and build caches stay the machine's (no block may download: GOPROXY=off)
		"GOCACHE=" + goenv("GOCACHE"), "GOMODCACHE=" + goenv("GOMODCACHE"), "GOPROXY=off",
		"GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local", "GOTELEMETRY=off",
	}
	for _, f := range []struct{ path, text string }{{sh.state, ""}, {sh.cwd, root}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(sh.stopServers)
	return sh
}

// script writes a block as a script that starts from the carried state and, when save is set,
// saves it again after the block.
func (sh *readmeShell) script(b readmeBlock, save bool) string {
	sh.n++
	path := filepath.Join(sh.dir, fmt.Sprintf("block%02d.sh", sh.n))
	text := "set -euo pipefail\nsource " + sh.state + "\ncd \"$(cat " + sh.cwd + ")\"\nsource " + path + ".body\n"
	if save {
		text += "export -p > " + sh.state + ".new && mv " + sh.state + ".new " + sh.state + "\npwd > " + sh.cwd + "\n"
	}
	for _, f := range []struct{ path, text string }{{path, text}, {path + ".body", b.body}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o600); err != nil {
			sh.t.Fatal(err)
		}
	}
	return path
}

// run runs a block in the foreground: it must exit 0 within two minutes.
func (sh *readmeShell) run(b readmeBlock) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", sh.script(b, true))
	cmd.Env = sh.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	out, err := cmd.CombinedOutput()
	sh.t.Logf("README.md line %d (%s):\n%s%s", b.line, time.Since(start).Round(time.Millisecond), b.body, indent(out))
	if err != nil {
		sh.t.Fatalf("README.md line %d: %v\n%s\n%s", b.line, err, b.body, sh.serverOutput())
	}
}

// background starts a block as a server and waits until its output holds b.arg's until=TEXT.
func (sh *readmeShell) background(b readmeBlock) {
	until := strings.Trim(strings.TrimPrefix(b.arg, "until="), " ")
	cmd := exec.Command("bash", sh.script(b, false))
	cmd.Env = sh.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &readmeServer{cmd: cmd, ready: make(chan struct{}), ended: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		sh.t.Fatal(err)
	}
	sh.servers = append(sh.servers, s)
	sh.serversDone.Add(2)
	go func() { defer sh.serversDone.Done(); s.read(pr, until) }()
	go func() { defer sh.serversDone.Done(); err := cmd.Wait(); pw.CloseWithError(err) }()
	select {
	case <-s.ready:
		sh.t.Logf("README.md line %d: started in the background, ready:\n%s", b.line, b.body)
	case <-s.ended:
		sh.t.Fatalf("README.md line %d: ended before it said %q:\n%s\n%s", b.line, until, b.body, s.output())
	case <-time.After(time.Minute):
		sh.t.Fatalf("README.md line %d: not ready (%q) within a minute:\n%s\n%s", b.line, until, b.body, s.output())
	}
}

// read collects a server's output and closes ready when it first holds until.
func (s *readmeServer) read(r io.Reader, until string) {
	defer close(s.ended)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	ready := false
	for sc.Scan() {
		s.mu.Lock()
		s.out.WriteString(sc.Text() + "\n")
		found := strings.Contains(s.out.String(), until)
		s.mu.Unlock()
		if found && !ready {
			ready = true
			close(s.ready)
		}
	}
	io.Copy(io.Discard, r) // a line longer than the buffer: keep draining so the server never blocks
}

func (s *readmeServer) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// serverOutput is every background block's output so far, for a failure message.
func (sh *readmeShell) serverOutput() string {
	var b strings.Builder
	for i, s := range sh.servers {
		fmt.Fprintf(&b, "--- background block %d:\n%s", i+1, s.output())
	}
	return b.String()
}

// stopServers stops the background blocks as Ctrl-C would (SIGINT to the process group), and
// kills what is left after the shutdown grace the README promises.
func (sh *readmeShell) stopServers() {
	for i := len(sh.servers) - 1; i >= 0; i-- {
		syscall.Kill(-sh.servers[i].cmd.Process.Pid, syscall.SIGINT)
	}
	done := make(chan struct{})
	go func() { sh.serversDone.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		for _, s := range sh.servers {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-done
	}
}

// writeFile writes a file block where its comment says (~ is the test's HOME; relative paths
// are in the carried directory).
func (sh *readmeShell) writeFile(b readmeBlock) {
	path := b.arg
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		path = filepath.Join(sh.home, rest)
	} else if !filepath.IsAbs(path) {
		cwd, err := os.ReadFile(sh.cwd)
		if err != nil {
			sh.t.Fatal(err)
		}
		path = filepath.Join(strings.TrimSpace(string(cwd)), path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		sh.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.body), 0o600); err != nil {
		sh.t.Fatal(err)
	}
	sh.t.Logf("README.md line %d: wrote %s", b.line, b.arg)
}

func indent(out []byte) string {
	if len(out) == 0 {
		return ""
	}
	return "  | " + strings.ReplaceAll(strings.TrimSuffix(string(out), "\n"), "\n", "\n  | ") + "\n"
}
