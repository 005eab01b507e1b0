package netsim

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func platformSupported() error { return nil }

const (
	tunSetIFF = 0x400454ca // TUNSETIFF
	iffTUN    = 0x0001
	iffNoPI   = 0x1000
)

// ifreq is struct ifreq as TUNSETIFF reads it: a name and the flags.
type ifreq struct {
	name  [16]byte
	flags uint16
	_     [22]byte
}

// openTUN creates TUN device name inside namespace ns and returns its file (non-blocking, so
// that Close ends a pending read). The device is created from a thread moved into ns for the
// duration; a thread that cannot be moved back is left locked, and so discarded by the runtime.
func openTUN(ns, name string) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, restored, err := openTUNHere(ns, name)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

// openTUNHere does openTUN's work on the calling, locked thread; restored says whether the
// thread is back in its own namespace.
func openTUNHere(ns, name string) (f *os.File, restored bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("netsim: %w", err)
	}
	defer own.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, true, fmt.Errorf("netsim: namespace %s: %w", ns, err)
	}
	defer target.Close()
	if err := setns(target); err != nil {
		return nil, true, fmt.Errorf("netsim: enter %s: %w", ns, err)
	}
	fd, openErr := openTUNFD(name)
	restored = setns(own) == nil
	if openErr != nil {
		return nil, restored, fmt.Errorf("netsim: TUN %s in %s: %w", name, ns, openErr)
	}
	return os.NewFile(uintptr(fd), "tun:"+ns+"/"+name), restored, nil
}

func openTUNFD(name string) (int, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var req ifreq
	copy(req.name[:15], name)
	req.flags = iffTUN | iffNoPI
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
		syscall.Close(fd)
		return -1, e
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}
