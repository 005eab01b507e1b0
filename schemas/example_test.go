package schemas_test

import (
	"fmt"

	"github.com/codexpool/codexpool/schemas"
)

func ExampleParseRequest() {
	r, err := schemas.ParseRequest([]byte(`{"input":"Say hello","stream":true,"metadata":{"team":"a"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	frame, _ := r.Upstream("gpt-5.1-codex")
	fmt.Println(r.Stream)
	fmt.Println(string(frame))

	_, err = schemas.ParseRequest([]byte(`{"input":"Say hello","max_output_tokens":0}`))
	fmt.Println(err)
	// Output:
	// true
	// {"type":"response.create","model":"gpt-5.1-codex","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello"}]}],"metadata":{"team":"a"},"store":false,"stream":true}
	// 400 invalid_request: "max_output_tokens": must be a positive integer
}

func ExampleWithOutputText() {
	completed := []byte(`{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"},{"type":"output_text","text":" there!"}]}]}`)
	reply, _ := schemas.WithOutputText(completed)
	fmt.Println(string(reply))
	// Output:
	// {"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"},{"type":"output_text","text":" there!"}]}],"output_text":"Hello there!"}
}
