package login

import (
	"strconv"
	"testing"
	"time"
)

func TestLineageJudge(t *testing.T) {
	now := time.Now()
	at := func(iat time.Time) string {
		return jwt(`{"iat":` + itoa(iat.Unix()) + `,"exp":` + itoa(iat.Add(time.Hour).Unix()) + `}`)
	}
	old := tokens{AccessToken: at(now.Add(-time.Hour)), RefreshToken: "rt-old"}
	cur := tokens{AccessToken: at(now.Add(-time.Minute)), RefreshToken: "rt-cur"}
	later := tokens{AccessToken: at(now), RefreshToken: "rt-later"}
	farFuture := tokens{AccessToken: jwt(`{"iat":` + itoa(now.Add(24*time.Hour).Unix()) + `,"exp":4102444800}`), RefreshToken: "rt-planted"}
	synced := func(seq uint64, spent ...string) lineage {
		l := lineage{seq: seq, synced: true}
		for _, rt := range spent {
			l.replaced(rt)
		}
		return l
	}
	for _, tc := range []struct {
		name string
		l    lineage
		pool tokens
		seq  uint64
		want verdict
	}{
		{name: "the same tokens", l: synced(3), pool: cur, seq: 9, want: verdictKeep},
		{name: "a higher Seq", l: synced(3), pool: later, seq: 4, want: verdictAdopt},
		{name: "a higher Seq but an earlier issue", l: synced(3), pool: old, seq: 4, want: verdictAdopt},
		{name: "a stale read: lower Seq, issued earlier", l: synced(5), pool: old, seq: 4, want: verdictKeep},
		{name: "a refresh token seen replaced, whatever its Seq", l: synced(5, "rt-old"), pool: old, seq: 99, want: verdictOffer},
		{name: "Seq went back (bucket recreated), issued later", l: synced(50), pool: later, seq: 2, want: verdictAdopt},
		{name: "at start: the pool issued later", l: lineage{}, pool: later, seq: 1, want: verdictAdopt},
		{name: "at start: the file issued later (a login made meanwhile)", l: lineage{}, pool: old, seq: 8, want: verdictOffer},
		{name: "at start: a far-future iat counts as none", l: lineage{}, pool: farFuture, seq: 8, want: verdictOffer},
		{name: "a far-future iat cannot beat a lower Seq", l: synced(8), pool: farFuture, seq: 8, want: verdictKeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.judge(tc.pool, tc.seq, cur, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLineageSpentIsBounded(t *testing.T) {
	var l lineage
	for i := range 2 * maxSpent {
		l.replaced("rt-" + itoa(int64(i)))
	}
	if len(l.spent) != maxSpent || !l.isSpent("rt-"+itoa(2*maxSpent-1)) || l.isSpent("rt-0") {
		t.Errorf("%d spent kept (want %d, the newest)", len(l.spent), maxSpent)
	}
	if l.isSpent("") {
		t.Error("the empty refresh token counts as spent")
	}
	if got := (&lineage{seq: ^uint64(0)}).next(0); got != ^uint64(0) {
		t.Errorf("next saturates: got %d", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
