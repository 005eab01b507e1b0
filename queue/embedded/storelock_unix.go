//go:build unix

package embedded

import (
	"errors"
	"os"
	"syscall"
)

// lockStore takes an exclusive advisory lock (flock) on a file in a JetStream store directory,
// so that two embedded servers never share one store. The kernel drops it when the process dies.
func lockStore(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrStoreInUse
		}
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
