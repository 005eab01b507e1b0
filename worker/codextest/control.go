package codextest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// controlPrefix is the path under which the HTTP control endpoints live.
const controlPrefix = "/_sim"

// serveControl serves the HTTP control endpoints:
//
//	GET  /_sim/stats                               Stats as JSON
//	GET  /_sim/accounts                            Stats.Accounts as JSON ({} without accounts)
//	GET  /_sim/login?account=                      NewLogin, answered as its auth.json
//	POST /_sim/reject?n=&status=&retry_after_ms=   RejectNext
//	POST /_sim/limit?rate=&burst=[&retry_after_ms=] SetUpgradeLimit (and SetRetryAfter)
//	POST /_sim/limit?account=&rate=&burst=         SetAccountUpgradeLimit
//	POST /_sim/fault?n=&kind=[&at=upgrade]         FaultNext (InjectUpgradeFault with at=upgrade)
//	POST /_sim/refresh_fault?n=&kind=              RefreshFaultNext
//	POST /_sim/usage?account=&window=&used=        SetUsage
//	POST /_sim/ws?off=true|false                   SetWSOff
//	POST /_sim/reset                               Reset
//	POST /_sim/close_clients                       CloseClientConnections
//
// POSTs answer with the Stats after the change.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path[len(controlPrefix):]
	switch name {
	case "/stats", "/accounts", "/login":
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use GET")
			return
		}
		s.serveControlGet(w, r, name)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use POST")
		return
	}
	q := r.URL.Query()
	bad := func(msg string) { writeError(w, http.StatusBadRequest, 0, "bad_parameter", msg) }
	intArg := func(key string, def int) (int, bool) {
		v := q.Get(key)
		if v == "" {
			return def, true
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad(key + " must be a non-negative integer")
			return 0, false
		}
		return n, true
	}
	switch name {
	case "/reject":
		n, ok1 := intArg("n", 1)
		status, ok2 := intArg("status", http.StatusForbidden)
		ra, ok3 := intArg("retry_after_ms", 0)
		if !ok1 || !ok2 || !ok3 {
			return
		}
		if status < 200 || status > 599 || status == http.StatusSwitchingProtocols {
			bad("status must be an HTTP error status")
			return
		}
		s.RejectNext(n, status, time.Duration(ra)*time.Millisecond)
	case "/limit":
		rate, err := strconv.ParseFloat(q.Get("rate"), 64)
		if err != nil || rate < 0 {
			bad("rate must be a non-negative number")
			return
		}
		burst, ok := intArg("burst", 0)
		if !ok {
			return
		}
		if q.Has("account") {
			if err := s.SetAccountUpgradeLimit(q.Get("account"), rate, burst); err != nil {
				writeError(w, http.StatusNotFound, 0, "not_found", err.Error())
				return
			}
			break
		}
		if q.Has("retry_after_ms") {
			ra, ok := intArg("retry_after_ms", 0)
			if !ok {
				return
			}
			s.SetRetryAfter(time.Duration(ra) * time.Millisecond)
		}
		s.SetUpgradeLimit(rate, burst)
	case "/fault":
		n, ok := intArg("n", 1)
		if !ok {
			return
		}
		f, err := ParseFault(q.Get("kind"))
		if err != nil {
			bad(err.Error())
			return
		}
		if q.Get("at") == "upgrade" {
			if !f.Upgrade() {
				bad("kind is not an upgrade-level fault")
				return
			}
			s.InjectUpgradeFault(n, f)
		} else {
			s.FaultNext(n, f)
		}
	case "/refresh_fault":
		n, ok := intArg("n", 1)
		if !ok {
			return
		}
		f, err := ParseRefreshFault(q.Get("kind"))
		if err != nil {
			bad(err.Error())
			return
		}
		s.RefreshFaultNext(n, f)
	case "/usage":
		window, ok1 := intArg("window", 0)
		used, ok2 := intArg("used", -1)
		if !ok1 || !ok2 {
			return
		}
		if used < 0 {
			bad("used is required")
			return
		}
		acct := q.Get("account")
		if s.accounts[acct] == nil {
			writeError(w, http.StatusNotFound, 0, "not_found", "unknown account "+strconv.Quote(acct))
			return
		}
		if err := s.SetUsage(acct, window, used); err != nil {
			bad(err.Error())
			return
		}
	case "/ws":
		off, err := strconv.ParseBool(q.Get("off"))
		if err != nil {
			bad("off must be true or false")
			return
		}
		s.SetWSOff(off)
	case "/reset":
		s.Reset()
	case "/close_clients":
		s.CloseClientConnections()
	default:
		writeError(w, http.StatusNotFound, 0, "not_found", "unknown control endpoint")
		return
	}
	writeStats(w, s.Stats())
}

func writeStats(w http.ResponseWriter, st Stats) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *Server) serveControlGet(w http.ResponseWriter, r *http.Request, name string) {
	switch name {
	case "/stats":
		writeStats(w, s.Stats())
	case "/accounts":
		accts := s.Stats().Accounts
		if accts == nil {
			accts = map[string]AccountStats{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(accts)
	case "/login":
		l, err := s.NewLogin(r.URL.Query().Get("account"))
		if err != nil {
			writeError(w, http.StatusNotFound, 0, "not_found", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(l.AuthJSON())
	}
}
