package gateway

import (
	"net/http"
	"strconv"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// refusedFields are the Responses request fields the Codex backend refuses or ignores
// (design/clients.md "Never forward"). POST /v1/responses answers a request that sets one with a
// 400 naming it, rather than forwarding a request bound to fail upstream or to be answered as
// if it had been honoured; a null value counts as absent. The translated routes (chat, Anthropic)
// drop them instead: their clients send them on every request.
var refusedFields = []string{"temperature", "top_p", "stream_options", "safety_identifier", "prompt_cache_retention"}

// refuseUnsupported returns the 400 for the first refused field body's members ms set to
// something other than null, or nil.
func refuseUnsupported(body []byte, ms []jsonobj.Member) *apiError {
	for _, f := range refusedFields {
		for _, m := range ms {
			if jsonobj.KeyIs(body[m.Key[0]:m.Key[1]], f) && !jsonobj.IsNull(body[m.Val[0]:m.Val[1]]) {
				return newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, f,
					strconv.Quote(f)+": not supported by the Codex backend behind this pool; remove it")
			}
		}
	}
	return nil
}
