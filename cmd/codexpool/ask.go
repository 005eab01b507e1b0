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

func runAsk(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "ask", "ask [--stream] [--model M] [--nats URL] PROMPT", askTrailer)
	stream := fs.Bool("stream", false, "print the answer as it arrives")
	model := fs.String("model", "", "model (default: the worker's CODEXPOOL_MODEL)")
	instructions := fs.String("instructions", "", "system instructions")
	natsURL := fs.String("nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	subject := fs.String("subject", "", "request subject (default $CODEXPOOL_SUBJECT, else codex.generate)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (sent as Codex-Timeout)")
	asJSON := fs.Bool("json", false, "print the whole reply (one-shot) or every event (stream) as JSON")
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: "ask: a PROMPT is required"}
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "-" {
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return fmt.Errorf("ask: read stdin: %w", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return exitError{code: 2, msg: "ask: the prompt is empty"}
	}
	if *timeout <= 0 {
		return exitError{code: 2, msg: "ask: --timeout must be positive"}
	}
	body := map[string]any{"input": prompt}
	if *model != "" {
		body["model"] = *model
	}
	if *instructions != "" {
		body["instructions"] = *instructions
	}
	if *stream {
		body["stream"] = true
	}
	req, _ := json.Marshal(body)

	// The same CODEXPOOL_NATS_* authentication and TLS settings as a worker.
	pool, err := loadPoolConfig(e, fs)
	if err != nil {
		return err
	}
	if *subject != "" {
		pool.Subject = *subject
	}
	nc, err := pool.dial("codexpool ask", *natsURL)
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderTimeout, timeout.String())
	cl := client.New(nc, client.Options{Subject: pool.Subject, CancelSubject: pool.CancelSubject})

	if *stream {
		wrote := false
		_, err = cl.Stream(ctx, req, hdr, func(ev []byte) error {
			if *asJSON {
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
	reply, err := cl.Generate(ctx, req, hdr)
	if err != nil {
		return askError(err)
	}
	if *asJSON {
		fmt.Fprintf(e.stdout, "%s\n", reply.Response)
		return nil
	}
	fmt.Fprintln(e.stdout, reply.OutputText)
	return nil
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
