package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
)

// Shared gate state: the gates of worker processes that share an upgrade limit exchange
// gate.Signals over core NATS, on one subject per scope. The gate decides everything; this file
// only carries its bytes: it publishes NextSignal every report interval and whenever Pending
// fires, and hands every message received to ObserveBinary (which validates it and bounds its
// effect). A worker cut off from NATS publishes nothing and hears nothing, and its gate falls
// back to pacing on its own.
//
// The link publishes its first signal as soon as it starts: peers trust a gate only after a few
// consistent signals, and workers that start together are often given a burst at once.

// GateSubjectPrefix is the prefix of every gate-state subject.
const GateSubjectPrefix = "codexpool.gate"

// GateSubject returns the subject the gates of one scope share: GateSubjectPrefix and a hash of
// the scope's key, so that the subject names no host, account or credential.
func GateSubject(scopeKey string) string {
	sum := sha256.Sum256([]byte("codexpool gate scope\x00" + scopeKey))
	return GateSubjectPrefix + "." + hex.EncodeToString(sum[:12])
}

// GateScopeSubject returns the gate-state subject of an account (identity: a non-secret hash of
// its credentials) in scope: "host" (this machine's workers with that account), "account" (every
// worker with it), or any other string (the workers with that string and account). ok is false for
// "process": no sharing.
func GateScopeSubject(scope, identity string) (subject string, ok bool) {
	switch scope {
	case "process":
		return "", false
	case "host":
		host, _ := os.Hostname()
		return GateSubject("host\x00" + host + "\x00" + identity), true
	case "account":
		return GateSubject("account\x00" + identity), true
	default:
		return GateSubject("custom\x00" + scope + "\x00" + identity), true
	}
}

// GateLinkStats are a link's counters.
type GateLinkStats struct {
	Subject       string `json:"subject"`
	Published     uint64 `json:"published"`
	Received      uint64 `json:"received"`
	Invalid       uint64 `json:"invalid"` // received but refused by the gate's decoder
	PublishErrors uint64 `json:"publish_errors"`
}

// GateLink connects one gate to its peers. Make it with LinkGate; stop it with Close.
type GateLink struct {
	nc      *nats.Conn
	g       *gate.Gate
	subject string
	sub     *nats.Subscription
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	log     *slog.Logger

	published, received, invalid, publishErrors atomic.Uint64
}

// LinkGate subscribes g to subject and starts publishing its signals: one at once, then at the
// cadence the gate asks for (g.NextSignalDelay: its report interval, faster while it joins the
// fleet; every gate of a scope must use the same report interval) and whenever it has urgent
// news. interval is not used any more (the gate's Config.ReportInterval is); it stays for
// compatibility.
func LinkGate(nc *nats.Conn, subject string, g *gate.Gate, interval time.Duration, log *slog.Logger) (*GateLink, error) {
	_ = interval
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &GateLink{nc: nc, g: g, subject: subject, stop: make(chan struct{}), done: make(chan struct{}), log: log}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		l.received.Add(1)
		if err := g.ObserveBinary(m.Data); err != nil {
			l.invalid.Add(1)
		}
	})
	if err != nil {
		return nil, err
	}
	// A flood must not grow memory: the gate drops what it cannot use, and NATS drops (and
	// counts as slow-consumer errors) what the callback cannot keep up with.
	_ = sub.SetPendingLimits(4096, 4<<20)
	l.sub = sub
	go l.publish()
	return l, nil
}

// publish publishes the gate's signals: one at once (so that the peers start to trust this gate
// before it has any news), then one whenever the gate's NextSignalDelay has passed or Pending
// fires.
func (l *GateLink) publish() {
	defer close(l.done)
	t := time.NewTimer(0)
	defer t.Stop()
	buf := make([]byte, 0, 128)
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			t.Reset(l.g.NextSignalDelay())
		case <-l.g.Pending():
		}
		sig, ok := l.g.NextSignal()
		if !ok {
			continue
		}
		var err error
		if buf, err = sig.AppendBinary(buf[:0]); err != nil {
			continue
		}
		if err := l.nc.Publish(l.subject, buf); err != nil {
			if l.publishErrors.Add(1) == 1 {
				l.log.Warn("gate: cannot publish to peers; pacing on this gate's own until NATS is back", "error", err)
			}
			continue
		}
		l.published.Add(1)
	}
}

// Stats returns the link's counters.
func (l *GateLink) Stats() GateLinkStats {
	return GateLinkStats{Subject: l.subject, Published: l.published.Load(), Received: l.received.Load(),
		Invalid: l.invalid.Load(), PublishErrors: l.publishErrors.Load()}
}

// Close stops publishing and unsubscribes. The gate keeps working on its own.
func (l *GateLink) Close() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		_ = l.sub.Unsubscribe()
	})
}
