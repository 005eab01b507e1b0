package queue

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// Job ids the pool makes. A job submitted without Nats-Msg-Id gets the id
//
//	base64url(HMAC-SHA256(key, stream name, stream creation time, stream sequence))[:128 bits]
//
// (22 characters of [A-Za-z0-9_-]). The sequence and the stream's creation time are the same on
// every delivery of the message, and the key is the same on every worker and across restarts, so
// a redelivered job keeps its id; without the key an outsider cannot tell the id from the
// sequence (which every PubAck tells). The creation time keeps a recreated stream, whose
// sequences start again at 1, from reusing the ids (and so the stored results) of the old one.
//
// The key is 256 random bits that the first worker puts into the metadata of the bucket
// JobsConfig.KeyBucket when it creates it: creating a bucket is one atomic JetStream API call, so
// concurrent workers agree on whichever creation won, and reading the key back needs only the
// stream lookup every worker is already allowed. The bucket holds no entries.
type jobIDs struct {
	key     []byte
	stream  string
	created int64 // the jobs stream's creation time, unix ns
}

// jobIDKeyMeta is the metadata field of the key bucket that holds the key (base64url).
const jobIDKeyMeta = "codexpool_job_id_key"

// of returns the id of the job at stream sequence seq.
func (k jobIDs) of(seq uint64) string {
	m := hmac.New(sha256.New, k.key)
	fmt.Fprintf(m, "%s\x00%d\x00%d", k.stream, k.created, seq)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// setupIDKey finds or creates the key bucket and returns the key in its metadata.
func setupIDKey(ctx context.Context, js jetstream.JetStream, cfg JobsConfig) ([]byte, error) {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // never fails (crypto/rand)
	want := jetstream.KeyValueConfig{
		Bucket:       cfg.KeyBucket,
		Description:  "codexpool: the key of the job ids the pool makes (in the metadata; no entries)",
		Storage:      jetstream.FileStorage,
		Replicas:     cfg.Replicas,
		History:      1,
		MaxValueSize: 1,
		MaxBytes:     1024,
		Metadata:     map[string]string{jobIDKeyMeta: base64.RawURLEncoding.EncodeToString(fresh)},
	}
	kv, err := store.Bucket(ctx, js, want)
	if err != nil {
		return nil, fmt.Errorf("queue: job id key bucket %s: %w", cfg.KeyBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: job id key bucket %s: %w", cfg.KeyBucket, err)
	}
	key, err := base64.RawURLEncoding.DecodeString(st.Metadata()[jobIDKeyMeta])
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("queue: job id key bucket %s exists without a key in its metadata field %s (delete it; a worker creates it again)",
			cfg.KeyBucket, strconv.Quote(jobIDKeyMeta))
	}
	return key, nil
}
