package anthropic

import (
	"encoding/json"
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

// modelInfo is one model in the shape of Anthropic's GET /v1/models.
type modelInfo struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// modelCreated is every model's created_at: the pool's models have no release date of their own.
const modelCreated = "1970-01-01T00:00:00Z"

// ModelList is the body of Anthropic's GET /v1/models for ids, on one page.
func ModelList(ids []string) []byte {
	page := struct {
		Data    []modelInfo `json:"data"`
		HasMore bool        `json:"has_more"`
		FirstID *string     `json:"first_id"`
		LastID  *string     `json:"last_id"`
	}{Data: make([]modelInfo, len(ids))}
	for i, id := range ids {
		page.Data[i] = modelInfo{Type: "model", ID: id, DisplayName: id, CreatedAt: modelCreated}
	}
	if len(ids) > 0 {
		page.FirstID, page.LastID = &ids[0], &ids[len(ids)-1]
	}
	b, _ := json.Marshal(page)
	return b
}

// ModelInfo is the body of Anthropic's GET /v1/models/{id}.
func ModelInfo(id string) []byte {
	b, _ := json.Marshal(modelInfo{Type: "model", ID: id, DisplayName: id, CreatedAt: modelCreated})
	return b
}

// Known reports whether a request naming name reaches a model on purpose: the pool serves it or
// a rule maps it.
func (m ModelMap) Known(name string, served []string) bool {
	return m.Resolve(name, served) != ""
}
