package codextest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// controlPrefix is the path under which the HTTP control endpoints live.
const controlPrefix = "/_sim"

// controlMux serves the HTTP control endpoints:
//
//	GET  /_sim/stats                               Stats as JSON
//	GET  /_sim/accounts                            Stats.Accounts as JSON ({} without accounts)
//	GET  /_sim/login?account=                      Logins.Issue, answered as its auth.json
//	POST /_sim/reject?n=&status=&retry_after_ms=   Faults.Reject
//	POST /_sim/limit?rate=&burst=[&retry_after_ms=] Limits.SetUpgradeRate("") (and SetRetryAfter)
//	POST /_sim/limit?account=&rate=&burst=         Limits.SetUpgradeRate(account)
//	POST /_sim/fault?n=&kind=[&at=upgrade]         Faults.Next(AtResponse or AtUpgrade)
//	POST /_sim/refresh_fault?n=&kind=              Faults.Refresh
//	POST /_sim/usage?account=&window=&used=        Accounts.SetUsage
//	POST /_sim/ws?off=true|false                   Limits.SetWSOff
//	POST /_sim/reset                               Faults.Clear and ResetStats
//	POST /_sim/close_clients                       CloseClientConnections
//
// POSTs answer with the Stats after the change. Errors have the origin's JSON error body: 400
// bad_parameter, 404 not_found (an unknown endpoint or account), 405 method_not_allowed (any
// method but GET for the GETs, but POST for the rest, unknown paths included).
func (s *Server) controlMux() *http.ServeMux {
	mux := http.NewServeMux()
	get := func(path string, h http.HandlerFunc) { handleOnly(mux, http.MethodGet, controlPrefix+path, h) }
	get("/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) })
	get("/accounts", s.getAccounts)
	get("/turns", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Turns()) })
	get("/login", s.getLogin)
	post := func(path string, change func(q *args) error) {
		handleOnly(mux, http.MethodPost, controlPrefix+path, func(w http.ResponseWriter, r *http.Request) {
			if err := change(&args{Values: r.URL.Query()}); err != nil {
				writeControlError(w, err)
				return
			}
			writeJSON(w, s.Stats())
		})
	}
	post("/reject", s.postReject)
	post("/limit", s.postLimit)
	post("/fault", s.postFault)
	post("/refresh_fault", s.postRefreshFault)
	post("/usage", s.postUsage)
	post("/ws", s.postWS)
	post("/reset", func(*args) error { s.Faults.Clear(); s.ResetStats(); return nil })
	post("/close_clients", func(*args) error { s.CloseClientConnections(); return nil })
	// Everything under the prefix but the GETs above is POST: an unknown path is 404 to a POST
	// and 405 to any other method.
	unknown := func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use POST")
			return
		}
		writeError(w, http.StatusNotFound, 0, "not_found", "unknown control endpoint")
	}
	mux.HandleFunc(controlPrefix, unknown)
	mux.HandleFunc(controlPrefix+"/", unknown)
	return mux
}

// handleOnly serves path with h for method alone: any other method gets 405.
func handleOnly(mux *http.ServeMux, method, path string, h http.HandlerFunc) {
	wrong := func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use "+method)
	}
	mux.HandleFunc(method+" "+path, h)
	mux.HandleFunc(path, wrong)
	if method == http.MethodGet {
		mux.HandleFunc(http.MethodHead+" "+path, wrong) // a GET pattern would serve HEAD too
	}
}

func (s *Server) getAccounts(w http.ResponseWriter, _ *http.Request) {
	accts := s.Stats().Accounts
	if accts == nil {
		accts = map[string]AccountStats{}
	}
	writeJSON(w, accts)
}

func (s *Server) getLogin(w http.ResponseWriter, r *http.Request) {
	l, err := s.Logins.Issue(r.URL.Query().Get("account"))
	if err != nil {
		writeError(w, http.StatusNotFound, 0, "not_found", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(l.AuthJSON())
}

func (s *Server) postReject(q *args) error {
	n, status, ra := q.count("n", 1), q.count("status", http.StatusForbidden), q.millis("retry_after_ms")
	if err := q.err(); err != nil {
		return err
	}
	if status < 200 || status > 599 || status == http.StatusSwitchingProtocols {
		return badParameter("status must be an HTTP error status")
	}
	s.Faults.Reject(n, status, ra)
	return nil
}

func (s *Server) postLimit(q *args) error {
	rate, err := strconv.ParseFloat(q.Get("rate"), 64)
	if err != nil || rate < 0 {
		return badParameter("rate must be a non-negative number")
	}
	burst := q.count("burst", 0)
	if err := q.err(); err != nil {
		return err
	}
	if q.Has("account") {
		if err := s.Limits.SetUpgradeRate(q.Get("account"), rate, burst); err != nil {
			return notFound(err.Error())
		}
		return nil
	}
	if q.Has("retry_after_ms") {
		ra := q.millis("retry_after_ms")
		if err := q.err(); err != nil {
			return err
		}
		s.Limits.SetRetryAfter(ra)
	}
	return s.Limits.SetUpgradeRate("", rate, burst)
}

func (s *Server) postFault(q *args) error {
	n, f := q.count("n", 1), parseArg(q, "kind", ParseFault)
	if err := q.err(); err != nil {
		return err
	}
	at := AtResponse
	if q.Get("at") == "upgrade" {
		if !f.Upgrade() {
			return badParameter("kind is not an upgrade-level fault")
		}
		at = AtUpgrade
	}
	s.Faults.Next(at, n, f)
	return nil
}

func (s *Server) postRefreshFault(q *args) error {
	n, f := q.count("n", 1), parseArg(q, "kind", ParseRefreshFault)
	if err := q.err(); err != nil {
		return err
	}
	s.Faults.Refresh(n, f)
	return nil
}

func (s *Server) postUsage(q *args) error {
	window, used := q.count("window", 0), q.count("used", -1)
	if err := q.err(); err != nil {
		return err
	}
	if used < 0 {
		return badParameter("used is required")
	}
	acct := q.Get("account")
	if s.Accounts.get(acct) == nil {
		return notFound("unknown account " + strconv.Quote(acct))
	}
	if err := s.Accounts.SetUsage(acct, window, used); err != nil {
		return badParameter(err.Error())
	}
	return nil
}

func (s *Server) postWS(q *args) error {
	off, err := strconv.ParseBool(q.Get("off"))
	if err != nil {
		return badParameter("off must be true or false")
	}
	s.Limits.SetWSOff(off)
	return nil
}

// args are a control request's query parameters. count and millis record the first bad one,
// which err returns.
type args struct {
	url.Values
	bad string // the first bad parameter's message
}

// count returns the non-negative integer parameter key, def when absent.
func (q *args) count(key string, def int) int {
	v := q.Get(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		q.fail(key + " must be a non-negative integer")
		return 0
	}
	return n
}

// millis returns the parameter key, a count of milliseconds, as a duration (0 when absent).
func (q *args) millis(key string) time.Duration {
	return time.Duration(q.count(key, 0)) * time.Millisecond
}

// parseArg returns the parameter key as parse reads it.
func parseArg[T any](q *args, key string, parse func(string) (T, error)) T {
	v, err := parse(q.Get(key))
	if err != nil {
		q.fail(err.Error())
	}
	return v
}

func (q *args) fail(msg string) {
	if q.bad == "" {
		q.bad = msg
	}
}

func (q *args) err() error {
	if q.bad != "" {
		return badParameter(q.bad)
	}
	return nil
}

// A controlError is a control request refused with status and code.
type controlError struct {
	status int
	code   string
	msg    string
}

func (e *controlError) Error() string { return e.msg }

func badParameter(msg string) error {
	return &controlError{http.StatusBadRequest, "bad_parameter", msg}
}

func notFound(msg string) error { return &controlError{http.StatusNotFound, "not_found", msg} }

func writeControlError(w http.ResponseWriter, err error) {
	var ce *controlError
	if !errors.As(err, &ce) {
		ce = &controlError{http.StatusInternalServerError, "server_error", err.Error()}
	}
	writeError(w, ce.status, 0, ce.code, ce.msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
