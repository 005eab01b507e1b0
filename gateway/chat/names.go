package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxIDLen is the longest call id or tool name the Codex backend takes.
const maxIDLen = 64

// shortID returns id unchanged when it fits, else its first 47 characters, "_" and the first 16
// hex digits of its SHA-256: stable, so a call and its output still match.
func shortID(id string) string {
	if len(id) <= maxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:47] + "_" + hex.EncodeToString(sum[:8])
}

// names maps the request's tool names to the names sent upstream and back.
type names struct {
	short map[string]string // original -> upstream
	orig  map[string]string // upstream -> original
}

// newNames assigns upstream names to the tools' names, in order; a shortened name that collides
// with one already taken gets "_1", "_2", ….
func newNames(tools []string) names {
	n := names{short: map[string]string{}, orig: map[string]string{}}
	for _, name := range tools {
		if _, seen := n.short[name]; seen {
			continue
		}
		s := shortName(name)
		if s != name {
			base := s
			for i := 1; n.orig[s] != ""; i++ {
				suffix := "_" + strconv.Itoa(i)
				s = base[:min(len(base), maxIDLen-len(suffix))] + suffix
			}
		}
		n.short[name], n.orig[s] = s, name
	}
	return n
}

// upstream returns the name to send for a tool name of the request.
func (n names) upstream(name string) string {
	if s, ok := n.short[name]; ok {
		return s
	}
	return shortName(name)
}

// original returns the client's name for an upstream name.
func (n names) original(name string) string {
	if o, ok := n.orig[name]; ok {
		return o
	}
	return name
}

// shortName is a name that fits: mcp__server__tool becomes mcp__tool, others are cut.
func shortName(name string) string {
	if len(name) <= maxIDLen {
		return name
	}
	if strings.HasPrefix(name, "mcp__") {
		if i := strings.LastIndex(name, "__"); i > len("mcp_") {
			name = "mcp__" + name[i+2:]
		}
	}
	return name[:min(len(name), maxIDLen)]
}
