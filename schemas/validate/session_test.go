package validate

import (
	"strings"
	"testing"

	"github.com/codexpool/codexpool/schemas"
)

func TestSessionRequest(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		prev    string // the previous_response_id accepted; "" with refusal
		refusal string // a substring of the refusal; "" = accepted
	}{
		{"continuation", `{"input":"x","previous_response_id":"resp_1"}`, "resp_1", ""},
		{"first turn", `{"input":"x"}`, "", ""},
		{"empty id", `{"input":"x","previous_response_id":""}`, "", `"previous_response_id"`},
		{"not a string", `{"input":"x","previous_response_id":7}`, "", `"previous_response_id"`},
		{"background still refused", `{"input":"x","background":true}`, "", `"background": not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := SessionRequest([]byte(tt.payload))
			if tt.refusal == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := r.PreviousResponseID(); got != tt.prev {
					t.Errorf("PreviousResponseID() = %q, want %q", got, tt.prev)
				}
				return
			}
			e, ok := schemas.AsError(err)
			if !ok || e.Code != schemas.CodeInvalidRequest || !strings.Contains(e.Message, tt.refusal) {
				t.Errorf("got %v, want invalid_request containing %q", err, tt.refusal)
			}
		})
	}
}
