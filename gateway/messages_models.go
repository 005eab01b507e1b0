package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/codexpool/codexpool/gateway/anthropic"
)

// GET /v1/models and /v1/models/{id} for Anthropic clients: the same models as for OpenAI
// clients, in Anthropic's shape, with Anthropic's keys and errors. Claude Code and the Anthropic
// SDKs are told apart by their headers.

// speaksAnthropic reports whether r comes from an Anthropic client: it sends anthropic-version
// (every Anthropic SDK does) or its key as x-api-key.
func speaksAnthropic(r *http.Request) bool {
	return r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != ""
}

// anthropicModels serves the model routes to an Anthropic client. A single model is found
// when the pool serves it or the model map names it (e.g. claude-sonnet-* with a rule for it).
func (g *Gateway) anthropicModels(w http.ResponseWriter, r *http.Request) outcome {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		return g.messageError(w, newAPIError(http.StatusMethodNotAllowed, CodeMethod, "", "gateway: "+r.URL.Path+" takes GET, not "+r.Method))
	}
	id, one := strings.CutPrefix(r.URL.Path, "/v1/models/")
	switch {
	case !one:
		writeJSON(w, http.StatusOK, anthropic.ModelList(g.cfg.Models))
	case g.cfg.ModelMap.Known(id, g.cfg.Models):
		writeJSON(w, http.StatusOK, anthropic.ModelInfo(id))
	default:
		return g.messageError(w, newAPIError(http.StatusNotFound, CodeNotFound, "model",
			fmt.Sprintf("gateway: the model %q is neither in this gateway's list nor in its model map", id)))
	}
	return ok(http.StatusOK)
}
