package dashboard

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		minutes int
		class   string
		label   string
	}{
		{name: "5 hours", minutes: 300, class: Class5h, label: "5 h"},
		{name: "5 hours, rounded down", minutes: 299, class: Class5h, label: "5 h"},
		{name: "a week", minutes: 10080, class: ClassWeekly, label: "weekly"},
		{name: "30 days", minutes: 43200, class: ClassMonthly, label: "monthly"},
		{name: "31 days", minutes: 44640, class: ClassMonthly, label: "monthly"},
		{name: "one hour", minutes: 60, class: ClassOther, label: "1 h"},
		{name: "one day", minutes: 1440, class: ClassOther, label: "1 d"},
		{name: "90 minutes", minutes: 90, class: ClassOther, label: "90 min"},
		{name: "not reported", minutes: 0, class: ClassOther, label: "length unknown"},
		{name: "four hours is not the 5-hour window", minutes: 240, class: ClassOther, label: "4 h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, label := classify(tt.minutes)
			if class != tt.class || label != tt.label {
				t.Errorf("classify(%d) = %q, %q; want %q, %q", tt.minutes, class, label, tt.class, tt.label)
			}
		})
	}
}
