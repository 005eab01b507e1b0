package netsim

import (
	"os"
	"sync"
	"time"
)

// link copies packets both ways between a hub-side and a host-side TUN device, each one
// released delay after it was read: a delay line. A full queue drops, as a router would.
type link struct {
	ends  [2]*os.File
	stopc chan struct{}
	wg    sync.WaitGroup
}

// packet is one packet in a delay line and when it may leave.
type packet struct {
	due  time.Time
	data []byte
}

func startLink(a, b *os.File, delay time.Duration, queue int) *link {
	if queue <= 0 {
		queue = 4096
	}
	l := &link{ends: [2]*os.File{a, b}, stopc: make(chan struct{})}
	for _, dir := range [][2]*os.File{{a, b}, {b, a}} {
		q := make(chan packet, queue)
		l.wg.Add(2)
		go l.read(dir[0], q, delay)
		go l.write(dir[1], q)
	}
	return l
}

// read reads packets from src until it is closed and queues each with its due time.
func (l *link) read(src *os.File, q chan<- packet, delay time.Duration) {
	defer l.wg.Done()
	defer close(q)
	for {
		buf := make([]byte, 65536)
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case q <- packet{due: time.Now().Add(delay), data: buf[:n]}:
		default: // queue full: drop
		}
	}
}

// write writes each queued packet to dst at its due time, until the queue closes or stop.
func (l *link) write(dst *os.File, q <-chan packet) {
	defer l.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for p := range q {
		if d := time.Until(p.due); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-l.stopc:
				return
			}
		}
		_, _ = dst.Write(p.data)
	}
}

// stop closes both devices and waits for the copying goroutines.
func (l *link) stop() {
	close(l.stopc)
	for _, f := range l.ends {
		_ = f.Close()
	}
	l.wg.Wait()
}
