package anthropic

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// ModelRule maps client model names matching Pattern (path.Match syntax, e.g. "claude-*opus*")
// to Model.
type ModelRule struct {
	Pattern, Model string
}

// ModelMap is an ordered list of rules; the first match wins.
type ModelMap []ModelRule

// ParseModelMap reads "pattern=model,pattern=model" (CODEXPOOL_GATEWAY_MODEL_MAP).
func ParseModelMap(s string) (ModelMap, error) {
	var m ModelMap
	for r := range strings.SplitSeq(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		p, model, found := strings.Cut(r, "=")
		p, model = strings.TrimSpace(p), strings.TrimSpace(model)
		if _, err := path.Match(p, ""); !found || p == "" || model == "" || err != nil {
			return nil, fmt.Errorf("anthropic: model map rule %q is not pattern=model", r)
		}
		m = append(m, ModelRule{Pattern: p, Model: model})
	}
	return m, nil
}

// Resolve returns the pool model for a client's model name: the name itself when the pool
// serves it, else the first matching rule's model, else "" (the pool's default model). A
// "[1m]" context suffix is ignored.
func (m ModelMap) Resolve(name string, served []string) string {
	name = strings.TrimSuffix(name, "[1m]")
	if slices.Contains(served, name) {
		return name
	}
	for _, r := range m {
		if ok, _ := path.Match(r.Pattern, name); ok {
			return r.Model
		}
	}
	return ""
}
