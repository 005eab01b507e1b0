package queue

import (
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
)

// Generator runs one generation; implemented by worker.Worker. emit is nil unless req.Stream; when
// streaming, Generate calls emit with each upstream event JSON (in order) and the returned payload is
// ignored; when not streaming it returns the one-shot reply payload. Errors: *schemas.Error, or
// ctx.Err() (unwrapped).
type Generator interface {
	Generate(ctx context.Context, req *schemas.Request, emit func(event []byte) error) ([]byte, error)
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
	// StatsData returns the endpoint data of `$SRV.STATS` for the service's Stats; nil = the Stats
	// alone. To add fields (the worker's gate, pool, accounts), return a struct that embeds Stats,
	// e.g. struct{ queue.Stats; worker.StatsData }: encoding/json writes the fields of both as one
	// object. A name in both would vanish from it, so the added names must not be Stats'.
	StatsData func(Stats) any
	// Jobs, when set, makes the service consume durable jobs from JetStream too (see JobsConfig);
	// NewService then creates the stream, consumer and bucket when they are missing.
	Jobs *JobsConfig
	// ObserveResultWrite, when set, receives the time each job result took to write to KV.
	ObserveResultWrite func(time.Duration)
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
	nc   *nats.Conn
	cfg  Config
	gen  Generator
	log  *slog.Logger
	svc  micro.Service
	slot chan struct{} // one token per running generation
	// freed wakes the jobs pull loop when a slot is released (see reserve).
	freed chan struct{}
	// pullMu makes the pull loop's reservation of a slot and its stealable state one step
	// for a request that finds every slot taken (see acquire).
	pullMu sync.Mutex

	base   context.Context // parent of every generation; cancelled when the grace runs out
	cancel context.CancelCauseFunc

	// testHook, when set, runs at the start of every handler call (tests only).
	testHook atomic.Pointer[func()]

	// handling counts handler calls in progress and lastHandled is when the last one ended (unix
	// ns): Shutdown waits for the handler to go quiet, because micro drains the subscription
	// asynchronously and its last messages must be handed back while the connection can still
	// subscribe (a connection in Drain cannot).
	handling    atomic.Int64
	lastHandled atomic.Int64
	microSubs   int // subscriptions micro made on nc (the endpoint and the $SRV verbs)

	// drainMu orders "am I draining?" checks in the handler against Shutdown: a forward
	// published under the read lock reaches the server before the subscription's UNSUB does.
	drainMu  sync.RWMutex
	draining bool

	mu     sync.Mutex    // guards the fields below
	active int           // goroutines started by the service and not yet finished
	closed bool          // no more goroutines may start
	idle   chan struct{} // closed when active drops to 0; nil when nobody waits

	stopOnce sync.Once
	stopErr  error
	stopped  chan struct{} // closed once the subscription is gone from the server

	st counters

	running   running            // generations by request id, for the cancel subject
	cancelSub *nats.Subscription // the cancel subject

	jobs       *jobStore                          // nil: no jobs
	pullState  atomic.Int32                       // pullIdle, pullWaiting or pullStolen (see stealPullSlot)
	pullCancel atomic.Pointer[context.CancelFunc] // ends the pull loop's wait
	jst        jobCounters
	jobStop    chan struct{} // closed by Shutdown: the pull loop stops
	jobsDone   chan struct{} // closed when the pull loop has returned
}

// NewService registers the micro service "codexpool" with the endpoint "generate" on cfg.Subject in
// queue group cfg.QueueGroup and returns once the subscription is active on the server. gen runs
// the generations. Shutdown stops it; the caller keeps ownership of nc.
func NewService(nc *nats.Conn, cfg Config, gen Generator) (*Service, error) {
	if nc == nil || gen == nil {
		return nil, errors.New("queue: NewService needs a connection and a generator")
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = DefaultQueueGroup
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = DefaultWorkerID()
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = int(nc.MaxPayload())
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxHops <= 0 {
		cfg.MaxHops = DefaultMaxHops
	}
	if cfg.CancelSubject == "" {
		cfg.CancelSubject = schemas.DefaultCancelSubject
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		nc:      nc,
		cfg:     cfg,
		gen:     gen,
		log:     cfg.Logger.With("component", "queue", "worker", cfg.WorkerID),
		slot:    make(chan struct{}, cfg.MaxInflight),
		freed:   make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	s.st.errors = make(map[schemas.Code]uint64)
	s.base, s.cancel = context.WithCancelCause(context.Background())

	subsBefore := nc.NumSubscriptions()
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "codexpool: LLM generations over the Codex Responses WebSocket",
		Metadata:    map[string]string{"worker": cfg.WorkerID},
		QueueGroup:  cfg.QueueGroup,
		StatsHandler: func(*micro.Endpoint) any {
			return s.statsData()
		},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.log.Error("NATS service error", "subject", err.Subject, "error", err.Description)
		},
	})
	if err != nil {
		s.cancel(nil)
		return nil, fmt.Errorf("queue: add micro service: %w", err)
	}
	err = svc.AddEndpoint(EndpointName, micro.HandlerFunc(s.handle),
		micro.WithEndpointSubject(cfg.Subject),
		micro.WithEndpointQueueGroup(cfg.QueueGroup),
		micro.WithEndpointMetadata(map[string]string{
			"worker":       cfg.WorkerID,
			"max_inflight": strconv.Itoa(cfg.MaxInflight),
		}))
	if err == nil {
		s.cancelSub, err = nc.Subscribe(cfg.CancelSubject, s.onCancel)
		if err != nil {
			err = fmt.Errorf("subscribe %s: %w", cfg.CancelSubject, err)
		}
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		_ = svc.Stop()
		if s.cancelSub != nil {
			_ = s.cancelSub.Unsubscribe()
		}
		s.cancel(nil)
		return nil, fmt.Errorf("queue: add endpoint %s on %q: %w", EndpointName, cfg.Subject, err)
	}
	s.svc = svc
	s.microSubs = nc.NumSubscriptions() - subsBefore - 1 // not the cancel subscription
	if cfg.Jobs != nil {
		jcfg := cfg.Jobs.withDefaults()
		js, err := setupJobsPatiently(nc, jcfg, s.log)
		if err != nil {
			_ = svc.Stop()
			s.cancel(nil)
			return nil, err
		}
		s.jobs = js
		s.jobStop, s.jobsDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.jobsDone)
			s.pullJobs(s.jobStop)
		}()
		s.log.Info("consuming durable jobs", "stream", jcfg.Stream, "consumer", schemas.JobsConsumer,
			"bucket", jcfg.Bucket, "ack_wait", jcfg.AckWait, "max_attempts", jcfg.MaxAttempts)
	}
	return s, nil
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
	s.stopOnce.Do(func() {
		if s.jobs != nil {
			close(s.jobStop) // pull no more jobs; the running ones finish below
		}
		s.drainMu.Lock()
		s.draining = true
		s.drainMu.Unlock()
		subsBefore := s.nc.NumSubscriptions()
		if err := s.svc.Stop(); err != nil {
			s.stopErr = fmt.Errorf("queue: stop micro service: %w", err)
		}
		// Everything the server routed to us before the UNSUB is now in the subscription's queue.
		fctx, cancel := context.WithTimeout(ctx, forwardProbeTimeout)
		defer cancel()
		if err := s.nc.FlushWithContext(fctx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Debug("flush during shutdown", "error", err)
		}
		// Every message routed to us is now in the subscription's local queue. nats.go removes a
		// drained subscription once that queue is empty: wait for micro's to go, then for the
		// handler to finish its last message and stay idle for handlerQuiet.
		s.waitSubsBelow(fctx, subsBefore-s.microSubs)
		s.waitHandlerQuiet(fctx)
		if s.jobs != nil {
			<-s.jobsDone // at most one FetchWait
		}
		close(s.stopped)
	})
	err := s.waitIdle(ctx)
	if err != nil {
		s.log.Warn("shutdown grace over; cancelling generations", "inflight", s.st.inflight.Load())
		s.cancel(errShutdown)
		_ = s.waitIdle(context.Background())
	}
	s.cancel(nil)
	if s.cancelSub != nil {
		_ = s.cancelSub.Unsubscribe()
	}
	if s.stopErr != nil {
		return errors.Join(s.stopErr, err)
	}
	return err
}

// goTrack runs f in a goroutine Shutdown waits for. It reports false (and does not run f) once
// Shutdown has finished waiting.
func (s *Service) goTrack(f func()) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.active++
	s.mu.Unlock()
	go func() {
		defer s.untrack()
		f()
	}()
	return true
}

func (s *Service) untrack() {
	s.mu.Lock()
	s.active--
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// waitIdle waits until no tracked goroutine runs and then refuses new ones, or until ctx is done.
func (s *Service) waitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.active == 0 {
			s.closed = true
			s.mu.Unlock()
			return nil
		}
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle := s.idle
		s.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// handlerQuiet is how long the handler must have been idle before Shutdown takes the drained
// subscription's queue to be empty.
const handlerQuiet = 50 * time.Millisecond

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

func (s *Service) waitHandlerQuiet(ctx context.Context) {
	for {
		idleFor := time.Since(time.Unix(0, s.lastHandled.Load()))
		if s.handling.Load() == 0 && idleFor >= handlerQuiet {
			return
		}
		wait := handlerQuiet - idleFor
		if wait <= 0 {
			wait = time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
