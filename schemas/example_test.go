package schemas_test

import (
	"fmt"

	"github.com/codexpool/codexpool/schemas"
)

func ExampleWithOutputText() {
	completed := []byte(`{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"},{"type":"output_text","text":" there!"}]}]}`)
	reply, _ := schemas.WithOutputText(completed)
	fmt.Println(string(reply))
	// Output:
	// {"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"},{"type":"output_text","text":" there!"}]}],"output_text":"Hello there!"}
}
