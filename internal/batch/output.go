package batch

import (
	"encoding/json"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// outputLine is the result line of l: the Batch API output format for Batch API input, else
// {"id","line","status","response"|"error"}.
func outputLine(l *line, r *client.Reply, err error) []byte {
	se, _ := schemas.AsError(err)
	if l.batchAPI {
		out := map[string]any{"id": l.id, "custom_id": l.customID, "error": nil}
		if se != nil {
			out["response"] = map[string]any{"status_code": se.Status, "request_id": l.id, "body": json.RawMessage(se.Body())}
			out["error"] = map[string]any{"code": se.Code, "message": se.Message}
		} else {
			out["response"] = map[string]any{"status_code": 200, "request_id": l.id, "body": json.RawMessage(r.Response)}
		}
		b, _ := json.Marshal(out)
		return b
	}
	out := map[string]any{"id": l.id, "line": l.n}
	if se != nil {
		out["status"] = se.Status
		out["error"] = json.RawMessage(errorDetail(se))
	} else {
		out["status"] = 200
		out["response"] = json.RawMessage(r.Response)
	}
	b, _ := json.Marshal(out)
	return b
}

// errorDetail is the object inside an error body.
func errorDetail(e *schemas.Error) []byte {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(e.Body(), &body)
	return body.Error
}
