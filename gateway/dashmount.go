package gateway

import (
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/codexpool/codexpool/schemas"
)

// dashboard serves Config.Dashboard to those who may see it: with keys, a caller sending one
// (Bearer, or the password of Basic authentication, which a browser prompts for: it cannot be
// told to send a Bearer header); without keys, a loopback caller that passes localOnly. A
// refused browser is asked for Basic credentials (WWW-Authenticate). Its answers are logged at
// debug: an open page polls twice a second.
func (g *Gateway) dashboard(w http.ResponseWriter, r *http.Request) outcome {
	if g.cfg.Dashboard == nil {
		return g.notFound(w, r)
	}
	if !g.keys.now().keyed {
		if a := localOnly(r); a != nil {
			a.write(w)
			return failed(a)
		}
	} else if !g.dashboardKey(r) {
		a := newAPIError(http.StatusUnauthorized, CodeInvalidAPIKey, "",
			"missing or unknown API key: send one of the gateway's keys as Authorization: Bearer <key>, or as the password of HTTP Basic authentication (any user name)")
		a.writeHeaders(w.Header())
		w.Header().Set("WWW-Authenticate", `Basic realm="codexpool dashboard", charset="UTF-8"`) // not a.write's Bearer: a browser prompts only for Basic
		writeJSON(w, a.Status, a.body())
		return failed(a)
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	g.cfg.Dashboard.ServeHTTP(rec, r)
	o := ok(rec.status)
	if rec.status >= 400 {
		o.code, o.err = CodeNotFound, "dashboard: "+http.StatusText(rec.status)
		if rec.status != http.StatusNotFound {
			o.code = schemas.CodeInvalidRequest
		}
	}
	o.quiet = true
	return o
}

// dashboardKey reports whether r carries one of the keys as a Bearer token or a Basic password,
// compared as authorize does: on SHA-256 digests, every key, in constant time.
func (g *Gateway) dashboardKey(r *http.Request) bool {
	tok := ""
	if _, pass, ok := r.BasicAuth(); ok {
		tok = pass
	} else if scheme, t, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(t)
	}
	if tok == "" {
		return false
	}
	return g.keys.now().ring.match(sha256.Sum256([]byte(tok))) != nil
}

// statusRecorder keeps the status a handler wrote, for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
