package dashboard

import (
	"encoding/json"
	"github.com/codexpool/codexpool/schemas"
	"io/fs"
	"testing"
	"time"
)

// TestPageWeightWithFullHistory: the page's assets and its first data answer with a full
// 15-minute ring (the heaviest it gets, for a fleet of 4 workers and 4 accounts) stay under
// 300 KB.
func TestPageWeightWithFullHistory(t *testing.T) {
	h := newHistory(int(DefaultHistory / DefaultResolution))
	t0 := time.Unix(1_800_000_000, 0)
	var ws []schemas.Stats
	for i := range 4 {
		w := schemas.Stats{ServiceStats: schemas.ServiceStats{Worker: "worker-" + string(rune('a'+i)), MaxInflight: 256}}
		for j := range 4 {
			w.Accounts = append(w.Accounts, schemas.AccountStats{Name: "account-" + string(rune('a'+j)), Windows: []schemas.WindowUsage{
				{Limit: "codex", Minutes: 300, UsedPercent: 41.5, ResetAt: t0}, {Limit: "codex", Minutes: 10080, UsedPercent: 7.25, ResetAt: t0}}})
		}
		ws = append(ws, w)
	}
	for i := range 2 * cap(h.points) {
		for k := range ws {
			ws[k].Completed += uint64(7 + i%5)
			ws[k].Failed += uint64(i % 2)
			ws[k].Errors = map[schemas.Code]uint64{"upstream_error": ws[k].Failed}
			ws[k].LatencySum += time.Duration(7+i%5) * 1234567 * time.Microsecond / 1000
		}
		h.add(t0.Add(time.Duration(i)*time.Second), ws)
	}
	data := Data{Time: t0, History: h.since(0)}
	data.Totals, data.Workers, data.Accounts, data.Gates = fleetView(ws)
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var assetBytes int
	err = fs.WalkDir(assets, "assets", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		f, err := fs.ReadFile(assets, path)
		assetBytes += len(f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("assets %d bytes + first data answer %d bytes (%d points) = %d bytes", assetBytes, len(b), len(data.History), assetBytes+len(b))
	if total := assetBytes + len(b); total > 300<<10 {
		t.Errorf("page weight %d bytes, want at most 300 KB", total)
	}
}
