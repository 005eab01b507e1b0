package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/schemas"
)

// Names of the micro service and its endpoint.
const (
	ServiceName  = schemas.ServiceName
	EndpointName = schemas.EndpointName
)

// Defaults of Config and ClientOptions.
const (
	DefaultSubject        = schemas.DefaultSubject
	DefaultQueueGroup     = schemas.DefaultQueueGroup
	DefaultVersion        = "0.1.0"
	DefaultMaxInflight    = 256
	DefaultRequestTimeout = 10 * time.Minute
	DefaultMaxHops        = 2
	DefaultReplyPrefix    = "_INBOX."
)

// Generator runs one generation; implemented by worker.Worker. emit is nil unless req.Stream; when
// streaming, Generate calls emit with each upstream event JSON (in order) and the returned payload is
// ignored; when not streaming it returns the one-shot reply payload. Errors: *schemas.Error, or
// ctx.Err() (unwrapped).
type Generator interface {
	Generate(ctx context.Context, req *schemas.Request, emit func(event []byte) error) ([]byte, error)
}

// An Admitter is a Generator that can tell, before a request runs, that it has no room for it
// (the worker owns as many sessions as it may). Admit reserves the room until release, which
// the Service calls once the generation is over (or instead of running it); an error is the
// answer for when no worker has room (429 worker_busy with a retry time): until then the
// request is handed back to the queue group like one that finds every slot taken.
type Admitter interface {
	Admit(req *schemas.Request) (release func(), err error)
}

// Config configures a Service. The zero value of every field is its documented default.
type Config struct {
	Subject         string        // default "codex.generate"
	QueueGroup      string        // default "codexpool"
	WorkerID        string        // default DefaultWorkerID(); sent as Codex-Worker and in micro metadata
	Version         string        // micro service version (semver), default "0.1.0"
	MaxInflight     int           // generations run at once; default 256
	MaxRequestBytes int           // larger payloads get 413; default nc.MaxPayload()
	RequestTimeout  time.Duration // longest a generation may run; default 10m
	MaxHops         int           // how often a full/draining worker hands a request back to the group; default 2
	CancelSubject   string        // where clients publish a Codex-Request-Id to stop it; default "codex.cancel"
	Logger          *slog.Logger  // default: discard
	// WorkerStats returns the worker's part of the endpoint data of `$SRV.STATS` (schemas.Stats:
	// the worker's gate, upstream and accounts beside the service's counters); nil = the
	// service's counters alone.
	WorkerStats func() schemas.WorkerStats
	// Jobs, when set (see OpenJobs), makes the service consume durable jobs from JetStream too.
	Jobs *Jobs
	// ReplyPrefixes are the subject prefixes a worker publishes replies, stream events and errors
	// on: a request whose reply subject (or a job whose Codex-Reply-To) starts with none of them
	// is never generated and never answered (see the contract's "Trust boundaries"). Default
	// ["_INBOX."].
	ReplyPrefixes []string
	// ObserveResultWrite, when set, receives the time each job result took to write to KV.
	ObserveResultWrite func(time.Duration)
	// TracerProvider makes the spans of requests and jobs (queue/trace.go); nil: none, while
	// the trace context a message carries is still passed on.
	TracerProvider trace.TracerProvider
}

// DefaultWorkerID returns the default worker id, "<hostname>-<pid>": stable for the process's
// life and telling an operator which machine and process answered.
func DefaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// errShutdown is the cancellation cause of generations cut off by Shutdown.
var errShutdown = errors.New("queue: worker shutting down")

// Service is a running codexpool micro service: it receives requests on Config.Subject in
// Config.QueueGroup and runs each one through a Generator in its own goroutine. Make one with
// NewService; stop it with Shutdown. Its methods are safe for concurrent use.
type Service struct {
	nc        *nats.Conn
	cfg       Config
	gen       Generator
	log       *slog.Logger
	svc       micro.Service
	cancelSub *nats.Subscription // the cancel subject
	tracer    trace.Tracer

	slots *slots // the in-flight cap, shared by requests and jobs

	base   context.Context // parent of every generation; cancelled when the grace runs out
	cancel context.CancelCauseFunc

	track   tracker    // goroutines Shutdown waits for
	drain   drainState // what Shutdown and the handler agree on
	stop    stopState
	st      counters
	refused refusalLog // requests refused for their reply subject
	running running    // generations by request id, for the cancel subject
	jobs    *jobConsumer

	// testHook, when set, runs at the start of every handler call (tests only).
	testHook atomic.Pointer[func()]
}

// stopState is the part of Shutdown that runs once.
type stopState struct {
	once    sync.Once
	err     error
	stopped chan struct{} // closed once the subscription is gone from the server
}

// NewService registers the micro service "codexpool" with the endpoint "generate" on cfg.Subject in
// queue group cfg.QueueGroup and returns once the subscription is active on the server. gen runs
// the generations; with cfg.Jobs (from OpenJobs) it consumes durable jobs too. Shutdown stops it;
// the caller keeps ownership of nc.
func NewService(nc *nats.Conn, cfg Config, gen Generator) (*Service, error) {
	if nc == nil || gen == nil {
		return nil, errors.New("queue: NewService needs a connection and a generator")
	}
	cfg = cfg.withDefaults(nc)
	if !schemas.ValidWorkerID(cfg.WorkerID) {
		return nil, fmt.Errorf("queue: worker id %q cannot end a subject (no spaces, wildcards or empty tokens): it names the worker's own subject", cfg.WorkerID)
	}
	s := &Service{
		nc:     nc,
		cfg:    cfg,
		gen:    gen,
		log:    cfg.Logger.With("component", "queue", "worker", cfg.WorkerID),
		slots:  newSlots(cfg.MaxInflight),
		stop:   stopState{stopped: make(chan struct{})},
		tracer: tracing.Tracer(cfg.TracerProvider),
	}
	s.st.errors = make(map[schemas.Code]uint64)
	s.base, s.cancel = context.WithCancelCause(context.Background())
	if err := s.subscribe(); err != nil {
		s.cancel(nil)
		return nil, err
	}
	if cfg.Jobs != nil {
		s.jobs = newJobConsumer(s, cfg.Jobs)
		s.jobs.start()
	}
	return s, nil
}

// withDefaults fills in the documented defaults.
func (c Config) withDefaults(nc *nats.Conn) Config {
	c.Subject = cmp.Or(c.Subject, DefaultSubject)
	c.QueueGroup = cmp.Or(c.QueueGroup, DefaultQueueGroup)
	if c.WorkerID == "" {
		c.WorkerID = DefaultWorkerID()
	}
	c.Version = cmp.Or(c.Version, DefaultVersion)
	if c.MaxInflight <= 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = int(nc.MaxPayload())
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxHops <= 0 {
		c.MaxHops = DefaultMaxHops
	}
	c.CancelSubject = cmp.Or(c.CancelSubject, schemas.DefaultCancelSubject)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.ReplyPrefixes) == 0 {
		c.ReplyPrefixes = []string{DefaultReplyPrefix}
	}
	return c
}

// subscribe adds the micro service, its endpoint and the cancel subscription, and waits until the
// server has them.
func (s *Service) subscribe() error {
	subsBefore := s.nc.NumSubscriptions()
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     s.cfg.Version,
		Description: "codexpool: LLM generations over the Codex Responses WebSocket",
		Metadata:    map[string]string{"worker": s.cfg.WorkerID},
		QueueGroup:  s.cfg.QueueGroup,
		StatsHandler: func(*micro.Endpoint) any {
			return s.statsData()
		},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.log.Error("NATS service error", "subject", err.Subject, "error", err.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("queue: add micro service: %w", err)
	}
	err = svc.AddEndpoint(EndpointName, micro.HandlerFunc(s.handle),
		micro.WithEndpointSubject(s.cfg.Subject),
		micro.WithEndpointQueueGroup(s.cfg.QueueGroup),
		micro.WithEndpointMetadata(map[string]string{
			"worker":       s.cfg.WorkerID,
			"max_inflight": strconv.Itoa(s.cfg.MaxInflight),
		}))
	if err == nil {
		err = s.addWorkerEndpoint(svc)
	}
	if err == nil {
		s.cancelSub, err = s.nc.Subscribe(s.cfg.CancelSubject, s.onCancel)
		if err != nil {
			err = fmt.Errorf("subscribe %s: %w", s.cfg.CancelSubject, err)
		}
	}
	if err == nil {
		err = s.nc.Flush()
	}
	if err != nil {
		_ = svc.Stop()
		if s.cancelSub != nil {
			_ = s.cancelSub.Unsubscribe()
		}
		return fmt.Errorf("queue: add endpoint %s on %q: %w", EndpointName, s.cfg.Subject, err)
	}
	s.svc = svc
	s.drain.microSubs = s.nc.NumSubscriptions() - subsBefore - 1 // not the cancel subscription
	return nil
}

// WorkerID returns the id this service answers with in the Codex-Worker header.
func (s *Service) WorkerID() string { return s.cfg.WorkerID }

// Shutdown stops the service as the contract's "Shutdown" describes: it stops the micro service
// (its subscription drains: messages already on their way are handed back to the queue group or
// answered 503 unavailable), waits for running generations until ctx is done, then cancels the rest
// (they answer 503 unavailable; streams end with an error message and the sentinel), and returns once
// every goroutine it started has finished. It returns ctx's error if generations had to be cancelled.
// It does not close the connection: drain it afterwards (nc.Drain) so every reply is flushed and the
// subscription's last messages are answered.
func (s *Service) Shutdown(ctx context.Context) error {
	s.stop.once.Do(func() { s.stop.err = s.leave(ctx) })
	err := s.track.waitIdle(ctx)
	if err != nil {
		s.log.Warn("shutdown grace over; cancelling generations", "inflight", s.st.inflight.Load())
		s.cancel(errShutdown)
		_ = s.track.waitIdle(context.Background())
	}
	s.cancel(nil)
	if s.cancelSub != nil {
		_ = s.cancelSub.Unsubscribe()
	}
	if s.stop.err != nil {
		return errors.Join(s.stop.err, err)
	}
	return err
}

// leave is the first part of Shutdown: it stops pulling jobs and the micro service, and returns
// once the subscription's last messages have been handled.
func (s *Service) leave(ctx context.Context) error {
	defer close(s.stop.stopped)
	if s.jobs != nil {
		s.jobs.halt() // pull no more jobs; the running ones finish with the generations
	}
	s.drain.begin()
	var err error
	subsBefore := s.nc.NumSubscriptions()
	if serr := s.svc.Stop(); serr != nil {
		err = fmt.Errorf("queue: stop micro service: %w", serr)
	}
	// Everything the server routed to us before the UNSUB is now in the subscription's queue.
	fctx, cancel := context.WithTimeout(ctx, forwardProbeTimeout)
	defer cancel()
	if ferr := s.nc.FlushWithContext(fctx); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
		s.log.Debug("flush during shutdown", "error", ferr)
	}
	// Every message routed to us is now in the subscription's local queue. nats.go removes a
	// drained subscription once that queue is empty: wait for micro's to go, then for the
	// handler to finish its last message and stay idle for handlerQuiet.
	s.waitSubsBelow(fctx, subsBefore-s.drain.microSubs)
	s.drain.waitHandlerQuiet(fctx)
	if s.jobs != nil {
		s.jobs.wait() // at most one FetchWait
	}
	return err
}

// goTrack runs f in a goroutine Shutdown waits for. It reports false (and does not run f) once
// Shutdown has finished waiting.
func (s *Service) goTrack(f func()) bool { return s.track.goTrack(f) }

// waitSubsBelow waits until nc has at most n subscriptions, or ctx is done.
func (s *Service) waitSubsBelow(ctx context.Context, n int) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for s.nc.NumSubscriptions() > n {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
