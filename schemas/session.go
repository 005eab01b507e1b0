package schemas

// The session headers a request may carry for sticky routing: requests that share a session go
// to the same account, so the account's prompt cache serves them. The gateway forwards them from
// HTTP to NATS under the same names.
const (
	HeaderClaudeSession = "X-Claude-Code-Session-Id" // Claude Code's conversation
	HeaderClaudeAgent   = "X-Claude-Code-Agent-Id"   // one agent of that conversation (sub-agents differ)
	HeaderSessionID     = "session_id"               // the Codex CLI's conversation
)

// SessionHeaders are the header names SessionKey reads, for forwarding.
var SessionHeaders = []string{HeaderClaudeSession, HeaderClaudeAgent, HeaderSessionID}

// SessionKey returns the sticky-routing key of a request from its headers (get returns a
// header's value, "" when absent): X-Claude-Code-Session-Id with its X-Claude-Code-Agent-Id
// (each agent of a session sticks on its own), else session_id; "" when neither is set, and the
// worker falls back to the body's prompt_cache_key. The key is opaque: the worker hashes it
// before it stores it anywhere.
func SessionKey(get func(string) string) string {
	if s := get(HeaderClaudeSession); s != "" {
		return "claude\x00" + s + "\x00" + get(HeaderClaudeAgent)
	}
	if s := get(HeaderSessionID); s != "" {
		return "session\x00" + s
	}
	return ""
}
