package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
)

// A conversation as a Session: the first turn goes to the queue subject, the next one, which
// continues the first response with only its new input, to the worker that answered.
func ExampleSession() {
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

	sess := client.New(nc, client.Options{}).Session("conversation-1")
	r, err := sess.Generate(ctx, []byte(`{"input":"Say hello"}`), nil)
	if err != nil {
		log.Fatal(err)
	}
	var first struct{ ID string }
	_ = json.Unmarshal(r.Response, &first)
	next := fmt.Sprintf(`{"input":"Again","previous_response_id":%q}`, first.ID)
	r, err = sess.Generate(ctx, []byte(next), nil)
	if e, ok := schemas.AsError(err); ok && e.Code == schemas.CodePreviousResponseNotFound {
		log.Fatal("the owner is gone: resend the whole conversation")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.OutputText, "from", r.Worker, "on", schemas.WorkerSubject(schemas.DefaultSubject, sess.Worker()))
	// Output:
	// Hello! from worker-1 on codex.generate.worker.worker-1
}
