// Package store opens the JetStream buckets and streams the pool keeps its state in, one way
// for all of them: find the object, create it when it is absent (another process creating it at
// the same moment is fine: the one that exists is then used), and keep an existing object's
// settings, which are the operator's (callers warn about the ones they care for). Every name the
// pool gives a bucket or a stream is in names.go.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoJetStream is returned (wrapped) by JetStream when the server has no JetStream.
var ErrNoJetStream = errors.New("queue: JetStream is not enabled")

// JetStream returns nc's JetStream context, or ErrNoJetStream (wrapped) when the server has none.
func JetStream(ctx context.Context, nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("%w: %w", ErrNoJetStream, err)
		}
		return nil, err
	}
	return js, nil
}

// Bucket opens the key-value bucket want.Bucket, creating it with want when absent.
func Bucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return open(
		func() (jetstream.KeyValue, error) { return js.KeyValue(ctx, want.Bucket) },
		func() (jetstream.KeyValue, error) { return js.CreateKeyValue(ctx, want) },
		jetstream.ErrBucketNotFound)
}

// Stream opens the stream want.Name, creating it with want when absent.
func Stream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	return open(
		func() (jetstream.Stream, error) { return js.Stream(ctx, want.Name) },
		func() (jetstream.Stream, error) { return js.CreateStream(ctx, want) },
		jetstream.ErrStreamNotFound)
}

// Consumer opens the durable consumer want.Durable of s, creating it with want when absent.
func Consumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return open(
		func() (jetstream.Consumer, error) { return s.Consumer(ctx, want.Durable) },
		func() (jetstream.Consumer, error) { return s.CreateConsumer(ctx, want) },
		jetstream.ErrConsumerNotFound)
}

// open gets an object, creates it when get says notFound, and gets it again when another process
// created it first.
func open[T any](get, create func() (T, error), notFound error) (T, error) {
	v, err := get()
	if !errors.Is(err, notFound) {
		return v, err
	}
	v, err = create()
	if err == nil {
		return v, nil
	}
	if again, gerr := get(); gerr == nil {
		return again, nil
	}
	return v, err
}
