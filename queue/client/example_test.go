package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
)

// hello is a stand-in for worker.Worker.
type hello struct{}

func (hello) Generate(_ context.Context, _ *schemas.Request, emit func([]byte) error) ([]byte, error) {
	if emit != nil {
		if err := emit([]byte(`{"type":"response.output_text.delta","delta":"Hello!"}`)); err != nil {
			return nil, err
		}
		return nil, emit([]byte(`{"type":"response.completed","response":{"id":"resp_1","output_text":"Hello!"}}`))
	}
	return []byte(`{"id":"resp_1","output_text":"Hello!"}`), nil
}

// A worker and a client on an embedded NATS server.
func ExampleClient() {
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

	svc, err := queue.NewService(nc, queue.Config{WorkerID: "worker-1"}, hello{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(ctx) }()

	c := client.New(nc, client.Options{})
	r, err := c.Generate(ctx, []byte(`{"input":"Say hello"}`), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.OutputText, "from", r.Worker)

	_, err = c.Stream(ctx, []byte(`{"input":"Say hello"}`), nil, func(event []byte) error {
		fmt.Println(string(event))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// Hello! from worker-1
	// {"type":"response.output_text.delta","delta":"Hello!"}
	// {"type":"response.completed","response":{"id":"resp_1","output_text":"Hello!"}}
}
