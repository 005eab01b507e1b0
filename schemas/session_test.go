package schemas

import "testing"

func TestValidWorkerID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"host-pid", "box-1234", true},
		{"dotted host", "box.example.com-1", true},
		{"empty", "", false},
		{"space", "a b", false},
		{"star", "a*", false},
		{"gt", "a.>", false},
		{"empty token", "a..b", false},
		{"trailing dot", "a.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidWorkerID(tt.id); got != tt.want {
				t.Errorf("ValidWorkerID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
	if got, want := WorkerSubject("codex.generate", "w1"), "codex.generate.worker.w1"; got != want {
		t.Errorf("WorkerSubject = %q, want %q", got, want)
	}
}
