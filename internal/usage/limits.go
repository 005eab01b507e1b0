package usage

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Limits are a key's caps; zero means no limit.
type Limits struct {
	RequestsPerMinute int   // requests admitted in any 60 s
	TokensPer5h       int64 // input + output tokens in the last 5 h
	TokensPerDay      int64 // ... in the last 24 h
	TokensPerWeek     int64 // ... in the last 7 days
	MaxConcurrent     int   // requests in progress at once
}

// LimitError is a request refused because its key is over a limit.
type LimitError struct {
	Limit      string        // the limit's name in the keys file, e.g. "requests_per_minute"
	Max        int64         // its value
	RetryAfter time.Duration // when the request may succeed, > 0
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("usage: the key is over its limit %s: %d", e.Limit, e.Max)
}

// casAttempts bounds the compare-and-set retries of one admission under contention.
const casAttempts = 50

// Admit admits one request of the key named key under lim, now: nil and a release func (call it
// once when the request ends), or a *LimitError for a key over a limit, or the error of a
// JetStream failure. Token limits count the records this Store has seen.
func (s *Store) Admit(ctx context.Context, key string, lim Limits) (release func(), err error) {
	now := time.Now()
	if e := s.tail.check(key, lim, now); e != nil {
		return nil, e
	}
	release = func() {}
	if lim.MaxConcurrent > 0 {
		if release, err = s.leases.acquire(ctx, key, lim.MaxConcurrent); err != nil {
			return nil, err
		}
	}
	if lim.RequestsPerMinute > 0 {
		if err := s.admitRate(ctx, key, lim.RequestsPerMinute, now); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// kvKey is key's entry in the bucket: names may hold characters KV keys may not.
func kvKey(kind, key string) string { return kind + "." + hex.EncodeToString([]byte(key)) }

// admitRate admits one request in the sliding minute: the entry holds the admission times (unix
// ms) of the last 60 s, and is updated only if no other gateway changed it since it was read.
func (s *Store) admitRate(ctx context.Context, key string, perMinute int, now time.Time) error {
	k := kvKey("rpm", key)
	for range casAttempts {
		var times []int64
		rev, err := s.get(ctx, k, &times)
		if err != nil {
			return err
		}
		times = window(times, now.Add(-time.Minute).UnixMilli())
		if len(times) >= perMinute {
			wait := time.UnixMilli(times[len(times)-perMinute]).Add(time.Minute).Sub(now)
			return &LimitError{Limit: "requests_per_minute", Max: int64(perMinute), RetryAfter: max(wait, time.Millisecond)}
		}
		times = append(times, now.UnixMilli())
		if err := s.put(ctx, k, rev, times); !errors.Is(err, errConflict) {
			return err
		}
		now = time.Now()
	}
	return fmt.Errorf("usage: admitting a request of %q: the limit state stayed contended", key)
}

// window drops the times before cutoff (times is in ascending order).
func window(times []int64, cutoff int64) []int64 {
	i := 0
	for i < len(times) && times[i] <= cutoff {
		i++
	}
	return times[i:]
}

// errConflict is a compare-and-set that lost to another writer.
var errConflict = errors.New("usage: entry changed since it was read")

func (s *Store) get(ctx context.Context, k string, v any) (uint64, error) {
	return getEntry(ctx, s.kv, k, v)
}

func (s *Store) put(ctx context.Context, k string, rev uint64, v any) error {
	return putEntry(ctx, s.kv, k, rev, v)
}

// getEntry decodes the entry at k into v and returns its revision; 0 when there is none.
func getEntry(ctx context.Context, kv jetstream.KeyValue, k string, v any) (uint64, error) {
	e, err := kv.Get(ctx, k)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("usage: reading limit state: %w", err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return e.Revision(), nil // a damaged entry is overwritten
	}
	return e.Revision(), nil
}

// putEntry writes v at k if its revision is still rev (0: if there is still none).
func putEntry(ctx context.Context, kv jetstream.KeyValue, k string, rev uint64, v any) error {
	b, _ := json.Marshal(v)
	var err error
	if rev == 0 {
		_, err = kv.Create(ctx, k, b)
	} else {
		_, err = kv.Update(ctx, k, b, rev)
	}
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyExists),
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
		return errConflict
	}
	return fmt.Errorf("usage: writing limit state: %w", err)
}
