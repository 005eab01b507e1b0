//go:build unix

package login

import (
	"errors"
	"os"
	"syscall"
)

// inode is the file's inode number: a rename over the file changes it even when the size and the
// modification time (coarse on some file systems) stay the same.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// tryLockFile takes an exclusive advisory lock (flock) on the file at path, creating it (0600)
// when missing, without waiting. ok is false when another process (or another open file of this
// one) holds it. The kernel drops the lock when its holder dies, so a crashed worker never
// leaves it held.
func tryLockFile(path string) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}
