package codex

import (
	"errors"
	"fmt"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
)

// ErrClosed is returned (wrapped, together with a 503 unavailable *schemas.Error) by Generate after
// Close.
var ErrClosed = errors.New("codex: client closed")

// forbiddenError is an origin 403 on the upgrade. It implements gate.Forbidden, so the connect
// policy retries it, and unwraps to the *schemas.Error{403, origin_forbidden} returned to callers.
type forbiddenError struct {
	err *schemas.Error
}

var _ gate.Forbidden = (*forbiddenError)(nil)

func (e *forbiddenError) Error() string { return e.err.Error() }

// Unwrap returns the contract error.
func (e *forbiddenError) Unwrap() error { return e.err }

// OriginForbidden returns the Retry-After the origin sent with the 403 (0 if none).
func (e *forbiddenError) OriginForbidden() time.Duration { return e.err.RetryAfter }

// upstreamError returns a 502 upstream_error with a "codex: " message.
func upstreamError(format string, args ...any) *schemas.Error {
	return schemas.Errorf(schemas.CodeUpstreamError, "codex: "+format, args...)
}

// closedError is what Generate returns after Close.
func closedError() error {
	return fmt.Errorf("%w: %w", ErrClosed, schemas.Errorf(schemas.CodeUnavailable, "codex: client closed"))
}

// proxyError is a failure of the account's proxy (an *egress.Error: unreachable, 407, no answer
// in time): a 502 upstream_error to callers, and egress.AsError finds the proxy's failure, for
// which the worker cools the account down (reason proxy).
type proxyError struct {
	err   *schemas.Error
	proxy *egress.Error
}

func (e *proxyError) Error() string { return e.err.Error() }

// Unwrap returns the contract error and the proxy's failure.
func (e *proxyError) Unwrap() []error { return []error{e.err, e.proxy} }

// asProxyError returns the proxyError of err when the proxy failed, nil otherwise. The proxy's
// text names it without the password; red removes the origin's secrets as everywhere.
func asProxyError(err error, red origintext.Redactor) error {
	pe, ok := egress.AsError(err)
	if !ok {
		return nil
	}
	e := upstreamError("%s", red.Clean(pe.Error()))
	if pe.Timeout() {
		e = schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: %s", red.Clean(pe.Error()))
	}
	return &proxyError{err: e, proxy: pe}
}
