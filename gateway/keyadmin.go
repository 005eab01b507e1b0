package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// AuditStream is the stream of audit records (AuditRecord), one per change of the keys bucket.
const AuditStream = store.AuditStream

// Errors of KeyAdmin that callers branch on.
var (
	ErrKeyExists = errors.New("gateway: a key of that name exists")
	ErrNoKey     = errors.New("gateway: no key of that name")
)

// AuditRecord is one change of the keys, as the audit stream holds it: who made it, what it was,
// when. It never holds a secret nor its digest.
type AuditRecord struct {
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`
	Action string    `json:"action"` // "add", "set", "revoke" or "seed"
	Key    string    `json:"key"`    // the key's name
	// Changes are the fields the change set, with their new values (limits, models, admin);
	// "secret_sha256": "changed" when it gave the key a new secret.
	Changes map[string]any `json:"changes,omitempty"`
}

// KeyAdmin changes the keys bucket and appends every change to the audit stream: what the
// `codexpool keys` commands call. Open one with OpenKeyAdmin; it needs a NATS user allowed to
// write the bucket and the stream (the operator role of docs/nats-roles.conf).
type KeyAdmin struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	who string
	now func() time.Time
}

// OpenKeyAdmin opens the keys bucket and the audit stream, creating them when absent. who names
// the operator in the audit records.
func OpenKeyAdmin(ctx context.Context, js jetstream.JetStream, who string) (*KeyAdmin, error) {
	kv, err := OpenKeysBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	if _, err := store.Stream(ctx, js, jetstream.StreamConfig{
		Name:        AuditStream,
		Description: "codexpool audit: who changed which client key, how, when (no secret)",
		Subjects:    []string{store.AuditSubject},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
	}); err != nil {
		return nil, fmt.Errorf("gateway: audit stream %s: %w", AuditStream, err)
	}
	return &KeyAdmin{js: js, kv: kv, who: who, now: time.Now}, nil
}

// NewSecret returns a new random key secret: "sk-cp-" and 256 random bits, base64url.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "sk-cp-" + base64.RawURLEncoding.EncodeToString(b)
}

// Add writes k as a new entry; ErrKeyExists (wrapped) when its name has one. A revoked name can
// be added again.
func (a *KeyAdmin) Add(ctx context.Context, k Key) error {
	if err := CheckKeyName(k.Name); err != nil {
		return err
	}
	e := EntryOf(k)
	e.Created, e.Updated, e.By = a.now().UTC(), a.now().UTC(), a.who
	b, _ := json.Marshal(e)
	if _, err := a.kv.Create(ctx, k.Name, b); errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %q (change it with `codexpool keys set`, or revoke it first)", ErrKeyExists, k.Name)
	} else if err != nil {
		return fmt.Errorf("gateway: add key %q: %w", k.Name, err)
	}
	return a.audit(ctx, "add", k.Name, changesOf(e, true))
}

// Set changes the entry name with change, which gets the entry as it is and names the fields it
// changed; ErrNoKey (wrapped) when there is none. A concurrent change of the same entry makes Set
// read it again and retry.
func (a *KeyAdmin) Set(ctx context.Context, name string, change func(*KeyEntry) []string) (KeyEntry, error) {
	for {
		cur, err := a.kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return KeyEntry{}, fmt.Errorf("%w: %q (see `codexpool keys list`)", ErrNoKey, name)
		} else if err != nil {
			return KeyEntry{}, fmt.Errorf("gateway: set key %q: %w", name, err)
		}
		var e KeyEntry
		if err := json.Unmarshal(cur.Value(), &e); err != nil {
			return KeyEntry{}, fmt.Errorf("gateway: set key %q: the entry does not decode: %w", name, err)
		}
		fields := change(&e)
		if _, err := e.Key(); err != nil {
			return KeyEntry{}, err
		}
		e.Updated, e.By = a.now().UTC(), a.who
		b, _ := json.Marshal(e)
		_, err = a.kv.Update(ctx, name, b, cur.Revision())
		if errors.Is(err, jetstream.ErrKeyExists) { // the revision moved on: someone else changed it
			continue
		} else if err != nil {
			return KeyEntry{}, fmt.Errorf("gateway: set key %q: %w", name, err)
		}
		all := changesOf(e, false)
		changes := map[string]any{}
		for _, f := range fields {
			changes[f] = all[f]
		}
		return e, a.audit(ctx, "set", name, changes)
	}
}

// Revoke deletes the entry name (a delete marker stays, which also revokes a keys-file key of
// that name on every gateway); ErrNoKey (wrapped) when there is none.
func (a *KeyAdmin) Revoke(ctx context.Context, name string) error {
	cur, err := a.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: %q (see `codexpool keys list`)", ErrNoKey, name)
	} else if err != nil {
		return fmt.Errorf("gateway: revoke key %q: %w", name, err)
	}
	if err := a.kv.Delete(ctx, name, jetstream.LastRevision(cur.Revision())); err != nil {
		return fmt.Errorf("gateway: revoke key %q: %w", name, err)
	}
	return a.audit(ctx, "revoke", name, nil)
}

// List returns the bucket's entries, by name.
func (a *KeyAdmin) List(ctx context.Context) ([]KeyEntry, error) {
	lister, err := a.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: list keys: %w", err)
	}
	var names []string
	for n := range lister.Keys() {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]KeyEntry, 0, len(names))
	for _, n := range names {
		cur, err := a.kv.Get(ctx, n)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // revoked meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("gateway: list keys: %s: %w", n, err)
		}
		var e KeyEntry
		if err := json.Unmarshal(cur.Value(), &e); err != nil {
			return nil, fmt.Errorf("gateway: list keys: %s does not decode: %w", n, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Seed adds each of keys (a keys file's) whose name has no entry and was never revoked; a name
// that has one keeps it: the bucket wins. It returns the names added and those kept. A name the
// bucket cannot hold (CheckKeyName) is an error before anything is written.
func (a *KeyAdmin) Seed(ctx context.Context, keys []Key) (added, kept []string, err error) {
	for _, k := range keys { // every name first: a bad one changes nothing
		if err := CheckKeyName(k.Name); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range keys {
		e := EntryOf(k)
		e.Created, e.Updated, e.By = a.now().UTC(), a.now().UTC(), a.who
		b, _ := json.Marshal(e)
		// A revoked name stays revoked: its delete marker is in the history (Get hides it, and
		// Create would write over it).
		if _, herr := a.kv.History(ctx, k.Name); herr == nil {
			kept = append(kept, k.Name)
			continue
		} else if !errors.Is(herr, jetstream.ErrKeyNotFound) {
			return added, kept, fmt.Errorf("gateway: seed key %q: %w", k.Name, herr)
		}
		if _, err := a.kv.Create(ctx, k.Name, b); errors.Is(err, jetstream.ErrKeyExists) {
			kept = append(kept, k.Name)
			continue
		} else if err != nil {
			return added, kept, fmt.Errorf("gateway: seed key %q: %w", k.Name, err)
		}
		if err := a.audit(ctx, "seed", k.Name, changesOf(e, true)); err != nil {
			return added, kept, err
		}
		added = append(added, k.Name)
	}
	return added, kept, nil
}

// Audit returns the audit records, oldest first: the last n of them (every one when n <= 0),
// and only those of key name when name is not empty. It reads the stream one message at a time
// (STREAM.MSG.GET), newest first, so it needs no consumer and stops when it has n.
func (a *KeyAdmin) Audit(ctx context.Context, name string, n int) ([]AuditRecord, error) {
	st, err := a.js.Stream(ctx, AuditStream)
	if err != nil {
		return nil, fmt.Errorf("gateway: audit stream %s: %w", AuditStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: audit stream %s: %w", AuditStream, err)
	}
	var out []AuditRecord
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && (n <= 0 || len(out) < n); seq-- {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed by the stream's limits since Info
		} else if err != nil {
			return nil, fmt.Errorf("gateway: audit stream %s, record %d: %w", AuditStream, seq, err)
		}
		var r AuditRecord
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return nil, fmt.Errorf("gateway: audit stream %s, record %d: not an audit record: %w", AuditStream, seq, err)
		}
		if name == "" || r.Key == name {
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// audit appends one record and waits for the stream's acknowledgement. The change is made by
// then: an error says so.
func (a *KeyAdmin) audit(ctx context.Context, action, name string, changes map[string]any) error {
	b, _ := json.Marshal(AuditRecord{Time: a.now().UTC(), Who: a.who, Action: action, Key: name, Changes: changes})
	if _, err := a.js.Publish(ctx, store.AuditSubject, b); err != nil {
		return fmt.Errorf("gateway: key %q: %s is made, but its audit record was not written to %s: %w", name, action, AuditStream, err)
	}
	return nil
}

// changesOf returns e's fields as an audit record shows them: the limits, models and admin
// (only those set unless all), and the digest only as "set".
func changesOf(e KeyEntry, new bool) map[string]any {
	m := map[string]any{
		"requests_per_minute": e.RequestsPerMinute, "tokens_per_5h": e.TokensPer5h, "tokens_per_day": e.TokensPerDay,
		"tokens_per_week": e.TokensPerWeek, "max_concurrent": e.MaxConcurrent, "models": e.Models, "admin": e.Admin,
		"secret_sha256": "changed",
	}
	if new {
		m["secret_sha256"] = "set"
		for f, v := range m {
			if v == 0 || v == int64(0) || v == false || (f == "models" && len(e.Models) == 0) {
				delete(m, f)
			}
		}
	}
	return m
}

// Digest returns the SHA-256 of secret, as the bucket stores it.
func Digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }
