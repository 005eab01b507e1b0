package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/codexpool/codexpool/gateway"
	ganthropic "github.com/codexpool/codexpool/gateway/anthropic"
)

// TestAnthropicModels: an Anthropic client (anthropic-sdk-go: anthropic-version and x-api-key)
// gets GET /v1/models in Anthropic's shape, a model the pool serves or the model map names by
// id, and Anthropic's 404 and 401; an OpenAI client still gets the OpenAI list.
func TestAnthropicModels(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{Models: []string{"gpt-5.1-codex", "gpt-5.1-codex-mini"},
		ModelMap: ganthropic.ModelMap{{Pattern: "claude-*haiku*", Model: "gpt-5.1-codex-mini"}}}})
	c := anthropicClient(p, key)

	page, err := c.Models.List(ctxT(t, waitTimeout), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].ID != "gpt-5.1-codex" || page.Data[1].ID != "gpt-5.1-codex-mini" ||
		page.Data[0].Type != "model" || page.HasMore || page.FirstID != "gpt-5.1-codex" || page.LastID != "gpt-5.1-codex-mini" {
		t.Errorf("got %s, want the two models on one page in Anthropic's shape", page.RawJSON())
	}
	for _, tc := range []struct {
		name, id string
		status   int
	}{
		{name: "served", id: "gpt-5.1-codex", status: 200},
		{name: "mapped", id: "claude-haiku-5-5", status: 200},
		{name: "unknown", id: "claude-opus-5-5", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := c.Models.Get(ctxT(t, waitTimeout), tc.id, anthropic.ModelGetParams{})
			var e *anthropic.Error
			switch {
			case tc.status == 200 && (err != nil || m.ID != tc.id || m.Type != "model"):
				t.Errorf("got %v %v, want the model %s", m, err, tc.id)
			case tc.status != 200 && (!errors.As(err, &e) || e.StatusCode != tc.status):
				t.Errorf("got %v, want a %d *anthropic.Error", err, tc.status)
			}
		})
	}
	wrong := anthropicClient(p, "sk-wrong")
	if _, err := wrong.Models.List(ctxT(t, waitTimeout), anthropic.ModelListParams{}); err == nil {
		t.Error("a wrong x-api-key listed the models")
	} else if e := (*anthropic.Error)(nil); !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: got %v, want a 401 *anthropic.Error", err)
	}

	resp := get(t, p, "/v1/models", true)
	var list struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	if err := json.Unmarshal(readAll(t, resp.Body), &list); err != nil || list.Object != "list" || len(list.Data) != 2 || list.Data[0].Object != "model" {
		t.Errorf("OpenAI client: got %+v %v, want the OpenAI list", list, err)
	}
}
