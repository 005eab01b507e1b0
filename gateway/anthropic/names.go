package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

const maxIDLen = 64

func itoa(i int) string { return strconv.Itoa(i) }

// shortCallID keeps a call id within the backend's 64 characters: a longer one becomes its first
// 47 characters, "_" and 16 hex digits of its SHA-256, the same on every turn.
func shortCallID(id string) string {
	if len(id) <= maxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:47] + "_" + hex.EncodeToString(sum[:8])
}

// nameMap shortens tool names longer than 64 characters and maps them back.
type nameMap struct {
	fwd  map[string]string // original -> short
	back map[string]string // short -> original, only for the names that changed
}

func newNameMap(tools []tool) *nameMap {
	m := &nameMap{fwd: map[string]string{}, back: map[string]string{}}
	used := map[string]bool{}
	for _, t := range tools {
		if len(t.Name) <= maxIDLen {
			used[t.Name] = true
		}
	}
	for _, t := range tools {
		if len(t.Name) <= maxIDLen || m.fwd[t.Name] != "" {
			continue
		}
		s := shortName(t.Name)
		for i := 1; used[s]; i++ {
			suffix := "_" + strconv.Itoa(i)
			s = shortName(t.Name)[:min(len(shortName(t.Name)), maxIDLen-len(suffix))] + suffix
		}
		used[s] = true
		m.fwd[t.Name], m.back[s] = s, t.Name
	}
	return m
}

// shortName makes mcp__server__tool into mcp__tool, and cuts any name to 64 characters.
func shortName(n string) string {
	if strings.HasPrefix(n, "mcp__") {
		if i := strings.LastIndex(n, "__"); i > len("mcp_") {
			n = "mcp__" + n[i+2:]
		}
	}
	return n[:min(len(n), maxIDLen)]
}

func (m *nameMap) short(n string) string {
	if s, ok := m.fwd[n]; ok {
		return s
	}
	return shortName(n)
}

// original maps a name from the backend back to the client's tool name.
func original(names map[string]string, n string) string {
	if o, ok := names[n]; ok {
		return o
	}
	return n
}
