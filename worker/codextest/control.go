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
//	POST /_sim/reject?n=&status=&retry_after_ms=   RejectNext
//	POST /_sim/limit?rate=&burst=[&retry_after_ms=] SetUpgradeLimit (and SetRetryAfter)
//	POST /_sim/fault?n=&kind=[&at=upgrade]         FaultNext (InjectUpgradeFault with at=upgrade)
//	POST /_sim/reset                               Reset
//	POST /_sim/close_clients                       CloseClientConnections
//
// POSTs answer with the Stats after the change.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path[len(controlPrefix):]
	if name == "/stats" {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use GET")
			return
		}
		writeStats(w, s.Stats())
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
