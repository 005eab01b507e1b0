package codextest_test

import (
	"encoding/json"
	"fmt"

	"github.com/codexpool/codexpool/worker/codextest"
	"github.com/gorilla/websocket"
)

func Example() {
	srv := codextest.NewServer(codextest.Options{Words: 4})
	defer srv.Close()

	c, _, err := websocket.DefaultDialer.Dial(srv.URL, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	frame := []byte(`{"type":"response.create","model":"gpt-5.1-codex","input":"Say hello"}`)
	if err := c.WriteJSON(json.RawMessage(frame)); err != nil {
		panic(err)
	}
	for {
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if err := c.ReadJSON(&ev); err != nil {
			panic(err)
		}
		if ev.Type == "response.output_text.delta" {
			fmt.Printf("%q\n", ev.Delta)
		}
		if ev.Type == "response.completed" {
			break
		}
	}
	fmt.Println(codextest.Answer(codextest.PromptOf(frame), 4))
	fmt.Println(srv.Stats().Completed)
	// Output:
	// "[codexpool sim] romeo"
	// " river"
	// " uniform"
	// " zephyr"
	// [codexpool sim] romeo river uniform zephyr
	// 1
}
