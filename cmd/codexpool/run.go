package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; else from build info.
var version = ""

func getVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.1.0-dev"
}

// exitError carries an exit code other than 1 (and an optional message) out of run.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

// errHelp is returned when the user asked for help: exit 0 after printing it.
var errHelp = errors.New("help requested")

const usage = `codexpool — run LLM generations at scale through NATS.

Usage:
  codexpool <command> [flags] [args]

Commands:
  worker   run one worker process (configured by codexpool.yaml and CODEXPOOL_*; --help lists them)
  sim      run a local Codex origin simulator (no account needed)
  ask      send one request and print the answer (--stream to stream it)
  bench    load test: NATS + simulator + N worker processes, a table per gate mode
  demo     one command, no account: embedded NATS, simulator, 2 workers, a burst, a table
  batch    submit every line of a JSONL file as a durable job and write the results (resumable)
  jobs     the durable jobs backlog: pending, in progress, redelivered, finished, failed
  usage    requests and tokens per client key or account, per hour (from the gateways' records)
  keys     the gateways' client keys, live: add (prints the secret once), set, revoke, list, seed
  gateway  serve the OpenAI and Anthropic APIs over HTTP in front of the pool (SDKs, Codex CLI, Claude Code)
  config   print the effective settings, each with its source (--example: a sample codexpool.yaml)
  version  print the version
  help     this text; 'codexpool help <command>' is that command's --help

Run 'codexpool <command> --help' for a command's flags.
`

// env is what the program reads and writes besides its arguments.
type env struct {
	getenv  func(string) string
	environ func() []string // the variables as NAME=value (os.Environ); nil = unknown, not checked
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// run is the whole program in an environment read through getenv alone: it cannot list its
// variables, so misspelt CODEXPOOL_* names go unnoticed (main uses env.run with os.Environ).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}.run(ctx, args)
}

// run is the whole program: main only wires the process's context, arguments, environment and
// streams.
func (e env) run(ctx context.Context, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{code: 2, msg: "no command given"}
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "worker":
		err = runWorker(ctx, e, rest)
	case "sim":
		err = runSim(ctx, e, rest)
	case "ask":
		err = runAsk(ctx, e, rest)
	case "bench":
		err = runBench(ctx, e, rest)
	case "demo":
		err = runDemo(ctx, e, rest)
	case "batch":
		err = runBatch(ctx, e, rest)
	case "jobs":
		err = runJobs(ctx, e, rest)
	case "usage":
		err = runUsage(ctx, e, rest)
	case "keys":
		err = runKeys(ctx, e, rest)
	case "gateway":
		err = runGateway(ctx, e, rest)
	case "config":
		err = runConfig(ctx, e, rest)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "codexpool", getVersion())
		return nil
	case "help", "-h", "--help", "-help":
		if cmd == "help" && len(rest) > 0 && rest[0] != "help" {
			return e.run(ctx, []string{rest[0], "--help"}) // codexpool help CMD = codexpool CMD --help
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return exitError{code: 2, msg: fmt.Sprintf("unknown command %q", cmd)}
	}
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// flags is a subcommand's flag set plus its help text.
type flags struct {
	*flag.FlagSet
	synopsis, trailer string
	config            *string // --config, on the subcommands that read settings; else nil
}

// settingsCommands are the subcommands that read settings: their flag sets have --config.
var settingsCommands = []string{"worker", "gateway", "ask", "batch", "jobs", "usage", "config"}

// newFlags returns a flag set that reports errors instead of exiting. Its help is a synopsis,
// the flags and an optional trailer.
func newFlags(e env, name, synopsis, trailer string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {} // printed by parse, to the right stream
	f := &flags{FlagSet: fs, synopsis: synopsis, trailer: trailer}
	if slices.Contains(settingsCommands, name) {
		f.config = fs.String("config", "", "read settings from `FILE` (YAML, see codexpool.example.yaml); default $"+envPrefix+"_CONFIG")
	}
	return f
}

// configPath is the settings file: --config, else CODEXPOOL_CONFIG, else none ("").
func (f *flags) configPath(e env) string {
	if f.config != nil && *f.config != "" {
		return *f.config
	}
	return e.getenv(envPrefix + "_CONFIG")
}

func (f *flags) printUsage(out io.Writer) {
	fmt.Fprintf(out, "Usage: codexpool %s\n", f.synopsis)
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(out, "\nFlags:\n")
		f.SetOutput(out)
		f.PrintDefaults()
	}
	if f.trailer != "" {
		fmt.Fprintf(out, "\n%s", strings.TrimLeft(f.trailer, "\n"))
	}
}

// parse parses args. --help prints the help to stdout and returns errHelp (exit 0); a bad flag
// prints the error and the help to stderr and returns exit code 2.
func (f *flags) parse(e env, args []string) error {
	err := f.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		f.printUsage(e.stdout)
		return errHelp
	}
	if err != nil {
		f.printUsage(e.stderr)
		return exitError{code: 2}
	}
	return nil
}
