package schemas

import "testing"

func TestSessionKey(t *testing.T) {
	tests := []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"none", nil, ""},
		{"session_id", map[string]string{HeaderSessionID: "s1"}, "session\x00s1"},
		{"claude wins over session_id", map[string]string{HeaderClaudeSession: "c1", HeaderSessionID: "s1"}, "claude\x00c1\x00"},
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
