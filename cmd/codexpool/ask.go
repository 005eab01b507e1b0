package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

const askTrailer = `Sends one generation request to the pool and prints the answer. PROMPT "-" reads the
prompt from standard input. Ctrl-C (or --timeout) stops the generation on the worker too: ask
publishes the request id on the cancel subject. Exit status: 0 on success, 1 with the error on
failure, 130 when interrupted.

Example:
  codexpool ask --stream "Write a haiku about queues"
`

// askOptions are the ask flags.
type askOptions struct {
	stream              bool
	model, instructions string
	natsURL, subject    string
	timeout             time.Duration
	asJSON              bool
	fs                  *flags // for --config
}

func runAsk(ctx context.Context, e env, args []string) error {
	o, req, err := askFlags(e, args)
	if err != nil {
		return err
	}
	// The same CODEXPOOL_NATS_* authentication and TLS settings as a worker.
	pool, err := loadPoolConfig(e, o.fs)
	if err != nil {
		return err
	}
	if o.subject != "" {
		pool.Subject = o.subject
	}
	nc, err := pool.dial(e.getenv, "codexpool ask", o.natsURL)
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderTimeout, o.timeout.String())
	cl := client.New(nc, client.Options{Subject: pool.Subject, CancelSubject: pool.CancelSubject})
	if o.stream {
		return askStream(ctx, e, cl, req, hdr, o.asJSON)
	}
	reply, err := cl.Generate(ctx, req, hdr)
	if err != nil {
		return askError(err)
	}
	if o.asJSON {
		fmt.Fprintf(e.stdout, "%s\n", reply.Response)
		return nil
	}
	fmt.Fprintln(e.stdout, reply.OutputText)
	return nil
}

// askFlags parses the ask flags and returns the request body they make.
func askFlags(e env, args []string) (askOptions, []byte, error) {
	var o askOptions
	fs := newFlags(e, "ask", "ask [--stream] [--model M] [--nats URL] PROMPT", askTrailer)
	o.fs = fs
	fs.BoolVar(&o.stream, "stream", false, "print the answer as it arrives")
	fs.StringVar(&o.model, "model", "", "model (default: the worker's CODEXPOOL_MODEL)")
	fs.StringVar(&o.instructions, "instructions", "", "system instructions")
	fs.StringVar(&o.natsURL, "nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	fs.StringVar(&o.subject, "subject", "", "request subject (default $CODEXPOOL_SUBJECT, else codex.generate)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long (sent as Codex-Timeout)")
	fs.BoolVar(&o.asJSON, "json", false, "print the whole reply (one-shot) or every event (stream) as JSON")
	if err := fs.parse(e, args); err != nil {
		return o, nil, err
	}
	if fs.NArg() == 0 {
		fs.printUsage(e.stderr)
		return o, nil, exitError{code: 2, msg: "ask: a PROMPT is required"}
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "-" {
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return o, nil, fmt.Errorf("ask: read stdin: %w", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return o, nil, exitError{code: 2, msg: "ask: the prompt is empty"}
	}
	if o.timeout <= 0 {
		return o, nil, exitError{code: 2, msg: "ask: --timeout must be positive"}
	}
	body := map[string]any{"input": prompt}
	if o.model != "" {
		body["model"] = o.model
	}
	if o.instructions != "" {
		body["instructions"] = o.instructions
	}
	if o.stream {
		body["stream"] = true
	}
	req, _ := json.Marshal(body)
	return o, req, nil
}

// askStream prints the answer's text deltas (or, asJSON, every event) as they arrive.
func askStream(ctx context.Context, e env, cl *client.Client, req []byte, hdr nats.Header, asJSON bool) error {
	wrote := false
	_, err := cl.Stream(ctx, req, hdr, func(ev []byte) error {
		if asJSON {
			_, err := fmt.Fprintf(e.stdout, "%s\n", ev)
			return err
		}
		var d schemas.Event
		if json.Unmarshal(ev, &d) == nil && d.Type == "response.output_text.delta" {
			wrote = true
			_, err := io.WriteString(e.stdout, d.Delta)
			return err
		}
		return nil
	})
	if wrote {
		fmt.Fprintln(e.stdout)
	}
	return askError(err)
}

func askError(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := schemas.AsError(err); ok {
		msg := fmt.Sprintf("ask: %d %s: %s", se.Status, se.Code, se.Message)
		if se.RetryAfter > 0 {
			msg += fmt.Sprintf(" (retry after %s)", se.RetryAfter)
		}
		return exitError{code: 1, msg: msg}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return exitError{code: 130, msg: "ask: cancelled (the worker was told to stop the generation)"}
	case errors.Is(err, nats.ErrNoResponders):
		return exitError{code: 1, msg: "ask: no worker is serving the subject (start one with: codexpool worker)"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return exitError{code: 1, msg: "ask: timed out waiting for the answer"}
	}
	return exitError{code: 1, msg: "ask: " + err.Error()}
}
