package codextest

import "sync/atomic"

// Stats are the server's counters, as returned by [Server.Stats] and GET ControlURL+"/stats".
type Stats struct {
	UpgradesAccepted int64 `json:"upgrades_accepted"` // 101 sent
	UpgradesRejected int64 `json:"upgrades_rejected"` // any upgrade not answered with 101 (incl. hang/drop faults)
	Rejected403      int64 `json:"rejected_403"`      // of those, with 403 (rate limit or RejectNext)
	Responses        int64 `json:"responses"`         // response.create frames that started a response
	Completed        int64 `json:"completed"`         // response.completed events sent
	ReusedResponses  int64 `json:"reused_responses"`  // responses on a socket that had started one before
	BusyRejected     int64 `json:"busy_rejected"`     // response.create refused: one already in flight
	Faults           int64 `json:"faults"`            // faults applied, response- and upgrade-level
	OpenSockets      int64 `json:"open_sockets"`      // upgraded sockets open now
	PeakOpenSockets  int64 `json:"peak_open_sockets"` // most open at once since start or ResetStats
}

// counters are the atomically updated Stats fields; open and peak live under Server.mu.
type counters struct {
	upgradesAccepted, upgradesRejected, rejected403 atomic.Int64
	responses, completed, reused, busy, faults      atomic.Int64
}

func (c *counters) reset() {
	for _, v := range []*atomic.Int64{&c.upgradesAccepted, &c.upgradesRejected, &c.rejected403,
		&c.responses, &c.completed, &c.reused, &c.busy, &c.faults} {
		v.Store(0)
	}
}
