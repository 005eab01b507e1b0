package validate_test

import (
	"fmt"

	"github.com/codexpool/codexpool/schemas/validate"
)

func ExampleRequest() {
	r, err := validate.Request([]byte(`{"input":"Say hello","stream":true,"metadata":{"team":"a"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	frame, _ := r.Upstream("gpt-5.1-codex")
	fmt.Println(r.Stream)
	fmt.Println(string(frame))

	_, err = validate.Request([]byte(`{"input":"Say hello","max_output_tokens":0}`))
	fmt.Println(err)
	// Output:
	// true
	// {"type":"response.create","model":"gpt-5.1-codex","client_metadata":{"team":"a"},"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello"}]}],"store":false,"stream":true}
	// 400 invalid_request: "max_output_tokens": must be a positive integer
}
