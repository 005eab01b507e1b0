package codextest

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestQueue(t *testing.T) {
	tests := []struct {
		name  string
		push  []queued[string] // n, v
		want  []string         // what successive pops give, then "" for empty
		total int              // pops made
	}{
		{name: "empty", total: 1, want: []string{""}},
		{name: "counts down in order", push: []queued[string]{{2, "a"}, {1, "b"}}, total: 4, want: []string{"a", "a", "b", ""}},
		{name: "n <= 0 queues nothing", push: []queued[string]{{0, "a"}, {-1, "b"}, {1, "c"}}, total: 2, want: []string{"c", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q queue[string]
			for _, p := range tt.push {
				q.push(p.n, p.v)
			}
			var got []string
			for range tt.total {
				v, ok := q.pop()
				if ok == (v == "") {
					t.Fatalf("pop = %q, %v: ok must say whether a value came", v, ok)
				}
				got = append(got, v)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pops %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFaultsNextStage: Next queues a fault where it strikes: at a response, at an upgrade (only
// upgrade-level faults), and an upgrade-only fault at the upgrade whatever the stage.
func TestFaultsNextStage(t *testing.T) {
	tests := []struct {
		name                  string
		at                    Stage
		fault                 Fault
		wantUpgrade, wantResp Fault
	}{
		{name: "response fault", at: AtResponse, fault: FaultFailed, wantResp: FaultFailed},
		{name: "drop at a response", at: AtResponse, fault: FaultDrop, wantResp: FaultDrop},
		{name: "drop at an upgrade", at: AtUpgrade, fault: FaultDrop, wantUpgrade: FaultDrop},
		{name: "hang_upgrade asked at a response", at: AtResponse, fault: FaultHangUpgrade, wantUpgrade: FaultHangUpgrade},
		{name: "response-only fault at an upgrade is ignored", at: AtUpgrade, fault: FaultFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Faults
			f.Next(tt.at, 1, tt.fault)
			up, _ := f.nextUpgrade()
			if resp := f.nextResponse(); up != tt.wantUpgrade || resp != tt.wantResp {
				t.Errorf("upgrade %q response %q, want %q %q", up, resp, tt.wantUpgrade, tt.wantResp)
			}
		})
	}
}

// TestFaultsUpgradeFaultBeforeReject: an upgrade meeting both a queued upgrade fault and a
// rejection takes the fault and leaves the rejection for the next one; Clear forgets all.
func TestFaultsUpgradeFaultBeforeReject(t *testing.T) {
	var f Faults
	f.Reject(1, http.StatusTooManyRequests, time.Second)
	f.Next(AtUpgrade, 1, FaultClose1008)
	if uf, rej := f.nextUpgrade(); uf != FaultClose1008 || rej.status != 0 {
		t.Fatalf("first upgrade: %q %+v, want close1008 and no rejection", uf, rej)
	}
	if uf, rej := f.nextUpgrade(); uf != FaultNone || rej.status != 429 || rej.retryAfter != time.Second {
		t.Fatalf("second upgrade: %q %+v, want the 429 with Retry-After 1s", uf, rej)
	}
	f.Reject(1, 500, 0)
	f.Next(AtResponse, 1, FaultFailed)
	f.Refresh(1, RefreshFault500)
	f.Clear()
	if rej, rf, ref := f.nextReject(), f.nextResponse(), f.nextRefresh(); rej.status != 0 || rf != FaultNone || ref != "" {
		t.Errorf("after Clear: %+v %q %q, want nothing queued", rej, rf, ref)
	}
}

func TestLimitsSetUpgradeRate(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		account string
		rate    float64
		burst   int
		wantErr bool
		wantA   []bool // allowUpgrade for account a, in turn
	}{
		{name: "server-wide bucket of 1", rate: 1, burst: 1, wantA: []bool{true, false}},
		{name: "account bucket of 2", account: "a", rate: 0.001, burst: 2, wantA: []bool{true, true, false}},
		{name: "account limit removed", account: "a", rate: 0, wantA: []bool{true, true, true}},
		{name: "unknown account", account: "nobody", rate: 1, wantErr: true, wantA: []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accts := newAccounts([]Account{{Name: "a", UpgradeRate: 1000, UpgradeBurst: 1000}})
			l := newLimits(Options{RetryAfter: time.Second}, accts)
			if err := l.SetUpgradeRate(tt.account, tt.rate, tt.burst); (err != nil) != tt.wantErr {
				t.Fatalf("SetUpgradeRate: %v, want error %v", err, tt.wantErr)
			}
			for i, want := range tt.wantA {
				ok, ra := l.allowUpgrade(accts.get("a"), now)
				if ok != want || (!ok && ra != time.Second) {
					t.Errorf("upgrade %d: %v (Retry-After %v), want %v (Retry-After 1s when refused)", i, ok, ra, want)
				}
			}
		})
	}
}

// TestOpenSocketFullTakesNoToken: at MaxConns an upgrade is refused before the rate limit is
// asked, so a 503 costs no token.
func TestOpenSocketFullTakesNoToken(t *testing.T) {
	ct := newConnTable()
	asked := 0
	allow := func() bool { asked++; return true }
	if got := ct.openSocket(1, allow); got != openOK {
		t.Fatalf("first socket: %v, want openOK", got)
	}
	if got := ct.openSocket(1, allow); got != openFull || asked != 1 {
		t.Fatalf("second socket: %v after %d asks, want openFull after 1", got, asked)
	}
	if got := ct.openSocket(0, func() bool { return false }); got != openLimited {
		t.Fatalf("refused by the limit: %v, want openLimited", got)
	}
	if open, peak := ct.counts(); open != 1 || peak != 1 {
		t.Errorf("open %d peak %d, want 1 1", open, peak)
	}
}
