package login

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Another holder of the lock file is refreshing when a 401 arrives; it gives up without new
// tokens and releases the lock half a second later. The waiting 401 must not wait out its whole
// deadline: the refresh it asked for happens once the lock is free, and it gets the new token.
func TestUnauthorizedAfterBusyLock(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	a := openAuth(t, srv, path, AuthConfig{})
	old := mustCreds(t, a)
	unlock, ok, err := tryLockFile(a.lock)
	if err != nil || !ok {
		t.Fatal("cannot take the lock", err)
	}
	release := time.AfterFunc(500*time.Millisecond, unlock) // the other holder's refresh, failing
	defer release.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	got, err := a.Unauthorized(ctx, old)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the 401 waited out the whole deadline (%s) after the other holder released the lock", time.Since(start).Round(time.Millisecond))
	}
	if err != nil || got.Token == old.Token {
		t.Errorf("after the lock was released: %v (token changed: %t), want the refreshed token", err, got.Token != old.Token)
	}
}
