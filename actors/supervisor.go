package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// supervisor is the root of a runtime's actors. It owns the pub/sub router,
// the renewal watchdog, the primitives actor (queues, semaphores, latches,
// delay-queue movers), the lock manager and the runtime's record
// (record.go), restarting any of them that fails (OneForOne); every timer
// and goroutine of the runtime belongs to one of them.
type supervisor struct {
	env     *runtimeEnv
	ready   chan *actor.PID // the manager's PID, once everything runs
	stopped chan struct{}   // closed when the supervisor and its children stopped
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		// The router and the watchdog keep their state across a restart
		// (same instance), so subscriptions and registrations survive it.
		router, renewal := newRouter(s.env), newRenewal(s.env)
		s.env.router = ctx.Spawn(props(func() actor.Actor { return router }))
		// The watchdog runs on goroutines of its own (not on the one that
		// sends to it): the goroutines renewing in Redis hand it a chunk's
		// outcome and go on with the next chunk while it tells the lock
		// manager, so a round's last renewal leaves without waiting for
		// the outcomes of 100k holds to be processed.
		s.env.renewal = ctx.Spawn(props(func() actor.Actor { return renewal }, actor.WithDispatcher(actor.NewDefaultDispatcher(300))))
		// Before the manager, which forwards the protocol's other messages here.
		s.env.primitives = ctx.Spawn(props(func() actor.Actor { return behindEntry(s.env, newPrimitives(s.env)) }, actor.WithSupervisor(lockSupervision)))
		mgr := ctx.Spawn(props(func() actor.Actor { return newManager(s.env) }, actor.WithSupervisor(lockSupervision)))
		s.env.locks = mgr
		if s.env.Record.Key != "" {
			ctx.Spawn(props(func() actor.Actor { return &recorder{env: s.env} }))
		}
		s.ready <- mgr
	case *actor.Stopped:
		close(s.stopped)
	}
}

// Handle is a started set of actors, as package actorlock drives it.
type Handle struct {
	env     *runtimeEnv
	sup     *actor.PID
	manager *actor.PID
	stopped chan struct{}
}

// Start spawns the supervisor and its children on cfg.System and returns
// once they run.
func Start(cfg Config) *Handle {
	env := newEnv(cfg)
	s := &supervisor{env: env, ready: make(chan *actor.PID, 1), stopped: make(chan struct{})}
	sup := cfg.System.Root.SpawnPrefix(props(func() actor.Actor { return s },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider))), "actorlock-")
	return &Handle{env: env, sup: sup, manager: <-s.ready, stopped: s.stopped}
}

// Manager is the PID that takes every request (Go commands and messages).
func (h *Handle) Manager() *actor.PID { return h.manager }

// NewRequestID returns an id unique among this runtime's requests.
func (h *Handle) NewRequestID() string { return h.env.NewRequestID() }

// Drain fails every waiting request with ErrClosed and releases every hold,
// returning when all releases have run or ctx ends.
func (h *Handle) Drain(ctx context.Context) error {
	_, err := askActor(ctx, h, h.manager, func(done chan<- struct{}) any { return &drainAll{done: done} })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("releasing held locks: %w", context.Cause(ctx))
	}
	return err
}

// Stats counts what the runtime keeps: lock actors, pub/sub topics and
// watchdog registrations.
type Stats struct {
	LockActors    int // live lock actors and dormant names
	DormantLocks  int
	Subscriptions int
	Renewals      int
	// DelayedQueueMovers and PrimitiveActors: the primitives actor's children
	// (movers; blocking-queue, semaphore and latch waiters).
	DelayedQueueMovers int
	PrimitiveActors    int
}

// statsQuery asks an actor for its count.
type statsQuery struct{ reply chan<- int }

// lockStats asks the manager for its counts: lock names with state (live
// actors and dormant names), and dormant names.
type lockStats struct{ reply chan<- [2]int }

// Stats asks the manager, the router, the watchdog and the primitives actor
// for their counts.
func (h *Handle) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	for _, q := range []struct {
		pid *actor.PID
		n   *int
	}{{h.env.router, &out.Subscriptions}, {h.env.renewal, &out.Renewals}} {
		n, err := askActor(ctx, h, q.pid, func(reply chan<- int) any { return &statsQuery{reply: reply} })
		if err != nil {
			return Stats{}, err
		}
		*q.n = n
	}
	locks, err := askActor(ctx, h, h.manager, func(reply chan<- [2]int) any { return &lockStats{reply: reply} })
	if err != nil {
		return Stats{}, err
	}
	out.LockActors, out.DormantLocks = locks[0], locks[1]
	n, err := askActor(ctx, h, h.env.primitives, func(reply chan<- [2]int) any { return &primitivesStats{reply: reply} })
	if err != nil {
		return Stats{}, err
	}
	out.DelayedQueueMovers, out.PrimitiveActors = n[0], n[1]
	return out, nil
}

// askActor sends pid what msg builds around a reply channel and waits for
// the reply: ErrClosed once the actors have stopped, ctx's error if it ends
// first. (Package actorlock's ask is the same for Go callers' requests,
// with a cancel; nothing asked here needs one.)
func askActor[R any](ctx context.Context, h *Handle, pid *actor.PID, msg func(chan<- R) any) (R, error) {
	reply := make(chan R, 1)
	h.env.System.Root.Send(pid, msg(reply))
	var zero R
	select {
	case r := <-reply:
		return r, nil
	case <-h.stopped:
		return zero, ErrClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Stop stops every actor, timer and goroutine of the runtime and waits for
// them, up to ctx.
func (h *Handle) Stop(ctx context.Context) error {
	h.env.System.Root.Stop(h.sup)
	var err error
	select {
	case <-h.stopped:
	case <-ctx.Done():
		err = fmt.Errorf("stopping actors: %w", context.Cause(ctx))
	}
	h.env.wakeups.stop()
	h.env.cancelCall()
	calls := make(chan struct{})
	go func() { h.env.calls.Wait(); close(calls) }()
	// What gives back an item or permits that nobody will have goes on
	// meanwhile (givingBack), for GuardTTL at most: by then any attempt of
	// the call that took them has run or never will.
	givingBack := time.AfterFunc(h.env.GuardTTL, h.env.stopGivingBack)
	defer givingBack.Stop()
	defer h.env.stopGivingBack()
	select {
	case <-calls:
	case <-ctx.Done():
		if err == nil {
			err = fmt.Errorf("waiting for Redis calls: %w", context.Cause(ctx))
		}
	}
	return err
}
