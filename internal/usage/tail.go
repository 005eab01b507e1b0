package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// week is the longest token window.
const week = 7 * 24 * time.Hour

// minuteTokens is the tokens of one key's records in one minute (unix minutes).
type minuteTokens struct {
	minute int64
	tokens int64
}

// tail follows the usage stream from a week ago on, keeping each key's tokens per minute, so
// token limits are checked without a round trip and count every gateway's requests.
type tail struct {
	cc jetstream.ConsumeContext

	mu   sync.Mutex
	keys map[string][]minuteTokens // ascending minutes
}

// startTail consumes the records of the last week and returns once it has read those present
// at the start (or ctx ends).
func startTail(ctx context.Context, stream jetstream.Stream, now time.Time) (*tail, error) {
	start := now.Add(-week)
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage: stream info: %w", err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return nil, fmt.Errorf("usage: tail consumer: %w", err)
	}
	t := &tail{keys: map[string][]minuteTokens{}}
	caught := make(chan struct{})
	var once sync.Once
	last := info.State.LastSeq
	if info.State.Msgs == 0 || info.State.LastTime.Before(start) {
		once.Do(func() { close(caught) })
	}
	t.cc, err = cons.Consume(func(m jetstream.Msg) {
		t.add(m.Data())
		if md, err := m.Metadata(); err == nil && (md.Sequence.Stream >= last || md.NumPending == 0) {
			once.Do(func() { close(caught) })
		}
	})
	if err != nil {
		return nil, fmt.Errorf("usage: tail: %w", err)
	}
	select {
	case <-caught:
		return t, nil
	case <-ctx.Done():
		t.cc.Stop()
		return nil, ctx.Err()
	}
}

func (t *tail) stop() { t.cc.Stop() }

// add counts one record's tokens.
func (t *tail) add(data []byte) {
	var r Record
	if json.Unmarshal(data, &r) != nil || r.Key == "" || r.Tokens() == 0 {
		return
	}
	m := r.Time.Unix() / 60
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := t.keys[r.Key]
	switch n := len(ms); {
	case n > 0 && ms[n-1].minute == m:
		ms[n-1].tokens += r.Tokens()
	case n > 0 && ms[n-1].minute > m:
		// A record of a gateway whose clock is behind: count it in the latest minute.
		ms[n-1].tokens += r.Tokens()
	default:
		ms = append(ms, minuteTokens{minute: m, tokens: r.Tokens()})
	}
	// Forget what no window covers any more.
	cut := time.Now().Add(-week).Unix() / 60
	i := 0
	for i < len(ms) && ms[i].minute < cut {
		i++
	}
	t.keys[r.Key] = ms[i:]
}

// check returns the LimitError of the first token limit key is at or over, or nil.
func (t *tail) check(key string, lim Limits, now time.Time) *LimitError {
	for _, w := range []struct {
		name  string
		span  time.Duration
		limit int64
	}{
		{"tokens_per_5h", 5 * time.Hour, lim.TokensPer5h},
		{"tokens_per_day", 24 * time.Hour, lim.TokensPerDay},
		{"tokens_per_week", week, lim.TokensPerWeek},
	} {
		if w.limit <= 0 {
			continue
		}
		if wait, over := t.over(key, w.span, w.limit, now); over {
			return &LimitError{Limit: w.name, Max: w.limit, RetryAfter: wait}
		}
	}
	return nil
}

// over reports whether key used limit tokens or more within span before now, and how long
// until enough of them leave the window.
func (t *tail) over(key string, span time.Duration, limit int64, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := t.keys[key]
	from := now.Add(-span).Unix() / 60
	var used int64
	first := len(ms)
	for i := len(ms) - 1; i >= 0 && ms[i].minute > from; i-- {
		used += ms[i].tokens
		first = i
	}
	if used < limit {
		return 0, false
	}
	for i := first; i < len(ms); i++ {
		used -= ms[i].tokens
		if used < limit {
			leaves := time.Unix((ms[i].minute+1)*60, 0).Add(span)
			return max(leaves.Sub(now), time.Second), true
		}
	}
	return span, true
}
