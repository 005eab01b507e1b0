package dashboard

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
)

// errorCount is the number of a worker's error replies of every code.
func errorCount(s schemas.Stats) uint64 {
	var n uint64
	for _, v := range s.Errors {
		n += v
	}
	return n
}

// decodeWorkers reads the endpoint data (schemas.Stats) of each STATS reply, one worker per reply, sorted by
// worker id; a reply without decodable data (not a codexpool worker) is skipped.
func decodeWorkers(replies []micro.Stats) []schemas.Stats {
	var out []schemas.Stats
	for _, r := range replies {
		for _, ep := range r.Endpoints {
			if ep == nil || len(ep.Data) == 0 {
				continue
			}
			var s schemas.Stats
			if json.Unmarshal(ep.Data, &s) != nil || s.Worker == "" {
				continue
			}
			out = append(out, s)
			break
		}
	}
	slices.SortFunc(out, func(a, b schemas.Stats) int { return cmp.Compare(a.Worker, b.Worker) })
	return out
}
