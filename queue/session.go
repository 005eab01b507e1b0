package queue

import (
	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
)

// Sessions (the contract's "Sessions"): besides the queue subject, every worker serves its own
// subject, schemas.WorkerSubject(Config.Subject, Config.WorkerID), as the micro endpoint
// schemas.WorkerEndpointName. A client learns the worker of a session from the Codex-Worker
// header of the session's first reply and sends the later turns there. The handler is the same
// as the queue subject's: which session a worker owns is the Generator's business (a
// continuation it does not own is answered previous_response_not_found), and a full or draining
// worker hands a request back to the queue group, where any worker serves a full resend. A
// client that sends to a stopped worker's subject gets NATS "no responders" at once.

// WorkerSubject returns the subject only this service's worker serves.
func (s *Service) WorkerSubject() string { return schemas.WorkerSubject(s.cfg.Subject, s.cfg.WorkerID) }

// addWorkerEndpoint adds the endpoint on the worker's own subject.
func (s *Service) addWorkerEndpoint(svc micro.Service) error {
	return svc.AddEndpoint(schemas.WorkerEndpointName, micro.HandlerFunc(s.handle),
		micro.WithEndpointSubject(s.WorkerSubject()),
		micro.WithEndpointMetadata(map[string]string{"worker": s.cfg.WorkerID}))
}
