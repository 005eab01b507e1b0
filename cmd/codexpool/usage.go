package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	usagestore "github.com/codexpool/codexpool/internal/usage"
)

const usageTrailer = `Prints the pool's usage since a time, per client key (--by key, the default) or per account
(--by account): requests, errors, input, output, cached and reasoning tokens, summed over every
gateway, then per hour. The gateways record one entry per finished request in the JetStream
stream CODEXPOOL_USAGE, so the totals survive restarts. Reads the CODEXPOOL_NATS_* settings.
`

func runUsage(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "usage", "usage [--by key|account] [--since 24h] [--hours] [--json] [--nats URL]", usageTrailer)
	natsURL := fs.String("nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	by := fs.String("by", usagestore.ByKey, "sum per `key` or per account")
	since := fs.Duration("since", 24*time.Hour, "how far back to read")
	hours := fs.Bool("hours", false, "also print each hour")
	asJSON := fs.Bool("json", false, "print the report as JSON (with every hour)")
	if err := fs.parse(e, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: fmt.Sprintf("usage takes no arguments, got %q", fs.Args())}
	case *by != usagestore.ByKey && *by != usagestore.ByAccount:
		return exitError{code: 2, msg: fmt.Sprintf("usage: --by must be key or account, got %q", *by)}
	case *since <= 0:
		return exitError{code: 2, msg: fmt.Sprintf("usage: --since must be positive, got %s", *since)}
	}
	pool, err := loadPoolConfig(e, fs)
	if err != nil {
		return err
	}
	nc, err := pool.dial(e.getenv, "codexpool usage", *natsURL)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	rep, err := usagestore.Query(ctx, js, usagestore.DefaultStream, time.Now().Add(-*since), *by)
	if err != nil && !errors.Is(err, usagestore.ErrNoUsage) {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printUsage(e, rep, *hours)
}

// printUsage writes rep as a table: one line per name, then the total (and each hour).
func printUsage(e env, rep usagestore.Report, hours bool) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\trequests\terrors\tinput\toutput\tcached\treasoning\t\n", rep.By)
	line := func(name string, t usagestore.Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, t.Requests, t.Errors, t.Input, t.Output, t.Cached, t.Reasoning)
	}
	for _, r := range rep.Rows {
		line(r.Name, r.Totals)
		if hours {
			for _, h := range r.Hours {
				line("  "+h.Hour.Format("2006-01-02 15:04Z"), h.Totals)
			}
		}
	}
	line("total", rep.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "since %s\n", rep.Since.UTC().Format(time.RFC3339))
	return err
}
