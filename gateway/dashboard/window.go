package dashboard

import "strconv"

// Window classes: what an origin's usage window of that length is called.
const (
	Class5h      = "5h"
	ClassWeekly  = "weekly"
	ClassMonthly = "monthly"
	ClassOther   = "other"
)

// classify names a window by its length in minutes: the 5-hour window (290 to 310 minutes),
// the weekly one (7 days ± 1 hour), the monthly one (28 to 31 days); any other length is
// "other", labelled with its length.
func classify(minutes int) (class, label string) {
	const day = 24 * 60
	switch {
	case minutes <= 0:
		return ClassOther, "length unknown"
	case minutes >= 290 && minutes <= 310:
		return Class5h, "5 h"
	case minutes >= 7*day-60 && minutes <= 7*day+60:
		return ClassWeekly, "weekly"
	case minutes >= 28*day && minutes <= 31*day:
		return ClassMonthly, "monthly"
	case minutes%day == 0:
		return ClassOther, strconv.Itoa(minutes/day) + " d"
	case minutes%60 == 0:
		return ClassOther, strconv.Itoa(minutes/60) + " h"
	}
	return ClassOther, strconv.Itoa(minutes) + " min"
}
