package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// MaxIDLen is the longest call id or tool name the Codex backend takes.
const MaxIDLen = 64

// ShortID returns id unchanged when it fits, else its first 47 characters, "_" and the first 16
// hex digits of its SHA-256: stable across turns, so a call and its output still match.
func ShortID(id string) string {
	if len(id) <= MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:47] + "_" + hex.EncodeToString(sum[:8])
}

// Names maps a request's tool names to the names sent upstream and back. The zero value maps
// every name to ShortName and back to itself.
type Names struct {
	up   map[string]string // original -> upstream, for the names that changed
	back map[string]string // upstream -> original, for the names that changed
}

// NewNames assigns upstream names to a request's tool names. The collision rule: a name that
// fits is sent as it is and is never renamed; a longer one is shortened (ShortName), and when the
// short name is taken — by a name that fits, in any position, or by an earlier shortened one — it
// gets "_1", "_2", … (cut so the whole stays within MaxIDLen).
func NewNames(tools []string) Names {
	n := Names{up: map[string]string{}, back: map[string]string{}}
	taken := map[string]bool{}
	for _, name := range tools {
		if len(name) <= MaxIDLen {
			taken[name] = true
		}
	}
	for _, name := range tools {
		if len(name) <= MaxIDLen || n.up[name] != "" {
			continue
		}
		base := ShortName(name)
		s := base
		for i := 1; taken[s]; i++ {
			suffix := "_" + strconv.Itoa(i)
			s = base[:min(len(base), MaxIDLen-len(suffix))] + suffix
		}
		taken[s] = true
		n.up[name], n.back[s] = s, name
	}
	return n
}

// Upstream returns the name to send for a tool name of the request.
func (n Names) Upstream(name string) string {
	if s, ok := n.up[name]; ok {
		return s
	}
	return ShortName(name)
}

// Original returns the client's name for an upstream name.
func (n Names) Original(name string) string {
	if o, ok := n.back[name]; ok {
		return o
	}
	return name
}

// Back is the upstream-to-original map of the names that changed (nil when none did).
func (n Names) Back() map[string]string {
	if len(n.back) == 0 {
		return nil
	}
	return n.back
}

// ShortName is a name that fits: mcp__server__tool becomes mcp__tool, and any name is cut to
// MaxIDLen. A name that fits is returned as it is.
func ShortName(name string) string {
	if len(name) <= MaxIDLen {
		return name
	}
	if strings.HasPrefix(name, "mcp__") {
		if i := strings.LastIndex(name, "__"); i > len("mcp_") {
			name = "mcp__" + name[i+2:]
		}
	}
	return name[:min(len(name), MaxIDLen)]
}
