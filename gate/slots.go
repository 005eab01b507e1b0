package gate

import "time"

// slotRing holds the start times of the permits in flight, indexed by permit id: ids are handed
// out in order, so the oldest outstanding permit is at the front and a report finds its slot in
// O(1). It grows (amortised) only when more permits are outstanding than ever before.
type slotRing struct {
	buf  []slot // len is 0 or a power of two
	head int    // index in buf of id base
	n    int    // ids base .. base+n-1 are in the ring
	base uint64 // id of the front slot; ids start at 1, so 0 is never outstanding
}

type slot struct {
	start time.Time
	done  bool // reported or expired
}

func (r *slotRing) at(i int) *slot { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// push adds a slot started at start and returns its id.
func (r *slotRing) push(start time.Time) uint64 {
	if r.base == 0 {
		r.base = 1
	}
	if r.n == len(r.buf) {
		buf := make([]slot, max(2*len(r.buf), 16))
		for i := range r.n {
			buf[i] = *r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	*r.at(r.n) = slot{start: start}
	r.n++
	return r.base + uint64(r.n-1)
}

// release marks id done and reports whether it was outstanding.
func (r *slotRing) release(id uint64) bool {
	if id < r.base || id >= r.base+uint64(r.n) {
		return false
	}
	s := r.at(int(id - r.base))
	if s.done {
		return false
	}
	s.done = true
	r.trim()
	return true
}

// expire marks done the outstanding slots that started at or before cutoff and returns how many.
func (r *slotRing) expire(cutoff time.Time) int {
	n := 0
	for r.n > 0 {
		s := r.at(0)
		if !s.done {
			if s.start.After(cutoff) {
				break
			}
			n++
		}
		r.pop()
	}
	return n
}

// oldest returns the start of the oldest outstanding slot.
func (r *slotRing) oldest() (time.Time, bool) {
	r.trim()
	if r.n == 0 {
		return time.Time{}, false
	}
	return r.at(0).start, true
}

func (r *slotRing) trim() {
	for r.n > 0 && r.at(0).done {
		r.pop()
	}
}

func (r *slotRing) pop() {
	*r.at(0) = slot{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	r.base++
}
