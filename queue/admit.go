package queue

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/validate"
)

// admission is what a request on codex.generate or a durable job brings to admit.
type admission struct {
	reply         string // the reply subject, or a job's Codex-Reply-To
	replyOptional bool   // a job may have no Codex-Reply-To; a request needs a reply subject
	hdr           nats.Header
	data          []byte
}

// admitted is what admit made of an admission.
type admitted struct {
	req     *schemas.Request // the decoded request; nil when refused, except for a body that failed validation
	timeout time.Duration    // how long the generation may run
	reply   string           // where answers may go; "" = nowhere (none given, or refused)
	// err, when set, refuses the request; it is answered on reply if reply is set.
	err *schemas.Error
	// parent is the trace context the message carried (traceparent); invalid for none.
	parent trace.SpanContext
}

// admit is the one check every request and every job passes before it may run: the reply subject
// (Config.ReplyPrefixes), the size (MaxRequestBytes), the Codex-Timeout header and the request
// JSON, in that order. A reply subject outside the allow-list is counted and logged (at most once
// a minute) and leaves reply empty, so nothing is ever published there.
func (s *Service) admit(in admission) admitted {
	switch {
	case in.reply == "" && !in.replyOptional:
		s.st.noReply.Add(1)
		s.log.Warn("request without a reply subject dropped", "bytes", len(in.data))
		return admitted{err: schemas.Errorf(schemas.CodeInvalidRequest, "a request needs a reply subject")}
	case in.reply != "" && !s.replyAllowed(in.reply):
		s.refuseReply(in.reply)
		return admitted{err: schemas.Errorf(schemas.CodeInvalidRequest,
			"the reply subject does not start with an allowed prefix (%s)", strings.Join(s.cfg.ReplyPrefixes, ", "))}
	}
	a := admitted{reply: in.reply, timeout: s.cfg.RequestTimeout}
	if n := len(in.data); n > s.cfg.MaxRequestBytes {
		a.err = schemas.Errorf(schemas.CodeRequestTooLarge,
			"request is %d bytes, more than the %d this worker accepts", n, s.cfg.MaxRequestBytes)
		return a
	}
	if v := in.hdr.Get(schemas.HeaderTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			a.err = schemas.Errorf(schemas.CodeInvalidRequest,
				"%s header %q is not a positive Go duration (e.g. 90s)", schemas.HeaderTimeout, v)
			return a
		}
		a.timeout = min(a.timeout, d)
	}
	sid := in.hdr.Get(schemas.HeaderSessionID)
	if len(sid) > schemas.MaxSessionIDBytes {
		a.err = schemas.Errorf(schemas.CodeInvalidRequest, "%s header is %d bytes, more than %d",
			schemas.HeaderSessionID, len(sid), schemas.MaxSessionIDBytes)
		return a
	}
	validateRequest := validate.Request
	if sid != "" {
		validateRequest = validate.SessionRequest
	}
	r, err := validateRequest(in.data)
	if r != nil {
		r.Session = sid
		r.StickyKey = schemas.SessionKey(in.hdr.Get)
		r.Metered = in.hdr.Get(schemas.HeaderMetered) != ""
	}
	a.req = r
	if err != nil {
		se, ok := schemas.AsError(err)
		if !ok {
			se = schemas.Errorf(schemas.CodeInvalidRequest, "%v", err)
		}
		a.err = se
	}
	return a
}

// replyAllowed reports whether subject starts with one of Config.ReplyPrefixes.
func (s *Service) replyAllowed(subject string) bool {
	for _, p := range s.cfg.ReplyPrefixes {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}

// refuseReply counts a request refused for its reply subject and logs it, at most once a minute.
func (s *Service) refuseReply(subject string) {
	s.st.refusedReply.Add(1)
	if n, ok := s.refused.due(time.Now()); ok {
		s.log.Warn("requests with a reply subject outside the allowed prefixes refused, neither run nor answered",
			"subject", truncateID(subject), "refused_since_last_log", n, "allowed", s.cfg.ReplyPrefixes)
	}
}

// refusalLogEvery is the most often a kind of refusal is logged.
const refusalLogEvery = time.Minute

// refusalLog rate-limits a log line: due reports whether to log now, and how many refusals the
// line stands for. The zero value is ready to use.
type refusalLog struct {
	last    atomic.Int64 // unix ns of the last line; 0 = never
	pending atomic.Uint64
}

func (l *refusalLog) due(now time.Time) (uint64, bool) {
	l.pending.Add(1)
	last := l.last.Load()
	if last != 0 && now.UnixNano()-last < int64(refusalLogEvery) {
		return 0, false
	}
	if !l.last.CompareAndSwap(last, now.UnixNano()) {
		return 0, false
	}
	return l.pending.Swap(0), true
}
