package usage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Totals are summed records.
type Totals struct {
	Requests  int64 `json:"requests"`
	Errors    int64 `json:"errors"`
	Input     int64 `json:"input_tokens"`
	Output    int64 `json:"output_tokens"`
	Cached    int64 `json:"cached_tokens"`
	Reasoning int64 `json:"reasoning_tokens"`
}

func (t *Totals) add(r Record) {
	t.Requests++
	if r.Error != "" {
		t.Errors++
	}
	t.Input += r.Input
	t.Output += r.Output
	t.Cached += r.Cached
	t.Reasoning += r.Reasoning
}

// Hour is the totals of one name in one hour.
type Hour struct {
	Hour time.Time `json:"hour"`
	Totals
}

// Row is one key's or account's usage: its totals and its hours, oldest first.
type Row struct {
	Name string `json:"name"`
	Totals
	Hours []Hour `json:"hours"`
}

// Report is the usage since a time, per key or per account.
type Report struct {
	Since time.Time `json:"since"`
	By    string    `json:"by"` // "key" or "account"
	Rows  []Row     `json:"rows"`
	Total Totals    `json:"total"`
}

// By values of Query.
const (
	ByKey     = "key"
	ByAccount = "account"
)

// Query reads the records of stream since a time and sums them by key or account (by: ByKey or
// ByAccount) and hour. A missing stream is ErrNoUsage.
func Query(ctx context.Context, js jetstream.JetStream, stream string, since time.Time, by string) (Report, error) {
	rep := Report{Since: since, By: by, Rows: []Row{}}
	if by != ByKey && by != ByAccount {
		return rep, fmt.Errorf("usage: by must be %q or %q, got %q", ByKey, ByAccount, by)
	}
	if stream == "" {
		stream = DefaultStream
	}
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return rep, ErrNoUsage
	}
	if err != nil {
		return rep, fmt.Errorf("usage: stream %s: %w", stream, err)
	}
	recs, err := readSince(ctx, st, since)
	if err != nil {
		return rep, err
	}
	rep.add(recs)
	return rep, nil
}

// Query is the package's Query on this Store's stream.
func (s *Store) Query(ctx context.Context, since time.Time, by string) (Report, error) {
	return Query(ctx, s.js, s.cfg.Stream, since, by)
}

// readSince reads every record of a time since since (published since then, too), up to the
// last one there at the start.
func readSince(ctx context.Context, st jetstream.Stream, since time.Time) ([]Record, error) {
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage: stream info: %w", err)
	}
	if info.State.Msgs == 0 || info.State.LastTime.Before(since) {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since,
	})
	if err != nil {
		return nil, fmt.Errorf("usage: reader: %w", err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage: reader: %w", err)
	}
	var out []Record
	// Exactly the records there now: a fetch that asks for more leaves its goroutine waiting.
	for left := ci.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("usage: reading records: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var r Record
			if json.Unmarshal(m.Data(), &r) == nil && !r.Time.Before(since) {
				out = append(out, r)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("usage: reading records: %w", err)
		}
		if n == 0 {
			return nil, errors.New("usage: reading records: the stream stopped delivering")
		}
		left -= uint64(n)
	}
	return out, nil
}

// add sums recs into the report's rows.
func (rep *Report) add(recs []Record) {
	rows := map[string]*Row{}
	for _, r := range recs {
		name := r.Key
		if rep.By == ByAccount {
			name = r.Account
		}
		if name == "" {
			name = "-"
		}
		row := rows[name]
		if row == nil {
			row = &Row{Name: name}
			rows[name] = row
		}
		row.Totals.add(r)
		rep.Total.add(r)
		h := r.Time.UTC().Truncate(time.Hour)
		if n := len(row.Hours); n == 0 || !row.Hours[n-1].Hour.Equal(h) {
			row.Hours = append(row.Hours, Hour{Hour: h})
		}
		row.Hours[len(row.Hours)-1].Totals.add(r)
	}
	for _, row := range rows {
		slices.SortFunc(row.Hours, func(a, b Hour) int { return a.Hour.Compare(b.Hour) })
		row.Hours = mergeHours(row.Hours)
		rep.Rows = append(rep.Rows, *row)
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int { return cmp.Compare(a.Name, b.Name) })
}

// mergeHours joins adjacent entries of the same hour (records of gateways with skewed clocks
// arrive out of order).
func mergeHours(hs []Hour) []Hour {
	out := hs[:0]
	for _, h := range hs {
		if n := len(out); n > 0 && out[n-1].Hour.Equal(h.Hour) {
			t := &out[n-1].Totals
			t.Requests += h.Requests
			t.Errors += h.Errors
			t.Input += h.Input
			t.Output += h.Output
			t.Cached += h.Cached
			t.Reasoning += h.Reasoning
			continue
		}
		out = append(out, h)
	}
	return out
}
