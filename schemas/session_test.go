package schemas

import "testing"

func TestSessionKey(t *testing.T) {
	tests := []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"none", nil, ""},
		{"session_id", map[string]string{HeaderStickySession: "s1"}, "session\x00s1"},
		{"claude wins over session_id", map[string]string{HeaderClaudeSession: "c1", HeaderStickySession: "s1"}, "claude\x00c1\x00"},
		{"claude agent", map[string]string{HeaderClaudeSession: "c1", HeaderClaudeAgent: "sub-2"}, "claude\x00c1\x00sub-2"},
		{"agent alone is no session", map[string]string{HeaderClaudeAgent: "sub-2"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SessionKey(func(k string) string { return tt.hdr[k] }); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

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
