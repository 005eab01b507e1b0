package gate

import "time"

// rateCounter counts events in rateBuckets buckets that together span a RateWindow.
type rateCounter struct {
	counts [rateBuckets]int
	epochs [rateBuckets]int64
}

const rateBuckets = 10

func bucketOf(now time.Time, window time.Duration) int64 {
	return now.UnixNano() / max(int64(window)/rateBuckets, 1)
}

func (c *rateCounter) add(now time.Time, window time.Duration) {
	e := bucketOf(now, window)
	i := int(e % rateBuckets)
	if c.epochs[i] != e {
		c.epochs[i], c.counts[i] = e, 0
	}
	c.counts[i]++
}

// sum returns the events of the last window (whole buckets, the current one included).
func (c *rateCounter) sum(now time.Time, window time.Duration) int {
	e := bucketOf(now, window)
	n := 0
	for i := range rateBuckets {
		if e-c.epochs[i] < rateBuckets {
			n += c.counts[i]
		}
	}
	return n
}
