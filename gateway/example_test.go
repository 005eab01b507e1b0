package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
)

// A gateway in front of a pool of one stand-in worker, called the way an OpenAI SDK calls it.
func ExampleNew() {
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ns.WaitForShutdown()
	defer ns.Shutdown()
	ctx := context.Background()
	nc, err := queue.Connect(ctx, ns.ClientURL(), "example", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	hello := genFunc(func(context.Context, *schemas.Request, func([]byte) error) ([]byte, error) {
		return []byte(`{"id":"resp_1","object":"response","status":"completed","output":[],"output_text":"Hello!"}`), nil
	})
	svc, err := queue.NewService(nc, queue.Config{WorkerID: "worker-1"}, hello)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(ctx) }()

	g := gateway.New(client.New(nc, client.Options{}), nc, gateway.Config{Keys: []string{"sk-example"}})
	srv := httptest.NewServer(g) // in a program: gateway.NewServer(g).Serve(listener)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"model":"gpt-5.1-codex","input":"Say hello"}`))
	req.Header.Set("Authorization", "Bearer sk-example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status     string `json:"status"`
		OutputText string `json:"output_text"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	fmt.Println(resp.StatusCode, r.Status, r.OutputText)
	// Output: 200 completed Hello!
}
