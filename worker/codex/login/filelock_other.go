//go:build !unix

package login

import "os"

func inode(os.FileInfo) uint64 { return 0 }

// tryLockFile has no implementation here: processes sharing an auth file on this system are
// coordinated through the pool (a Coordinator) only.
func tryLockFile(string) (unlock func(), ok bool, err error) { return func() {}, true, nil }
