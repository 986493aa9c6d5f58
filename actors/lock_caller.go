package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/messages"
)

type reqKey struct {
	// from: who asked. A lock message: its owner id (its token proves it;
	// the sender PID proves nothing); a queue or semaphore message: its
	// sender PID; "" for Go callers.
	from string
	id   string
}

// request is one Acquire waiting for its answer in a lock actor.
type request struct {
	waitState
	kind     messages.Kind
	owner    string
	lease    time.Duration // 0: watchdog
	deadline time.Time     // zero: none
	tryOnce  bool
	by       caller // nil: nobody to tell any more

	inflight bool                 // an attempt for it is in flight
	unsynced int                  // grants undone because too few replicas confirmed them
	enqueued bool                 // fair lock: it has a place in the Redis queue
	left     bool                 // fair lock: its place has been given up
	gaveUp   *AcquireResult       // fair lock: its answer, held until its place is given up (lock_fair.go)
	overdue  scheduler.CancelFunc // the timer that bounds how long gaveUp is held
	met      bool                 // an attempt met another owner: its grant is a hand-off through Redis
	tries    int                  // attempts started
	passed   passMark             // read-write lock: when it last tried before a writer ahead (lock_rw.go)
}

func (r *request) leaseOr(watchdog time.Duration) time.Duration {
	if r.lease > 0 {
		return r.lease
	}
	return watchdog
}

func (r *request) write() bool { return r.kind == messages.Kind_KIND_WRITE }

// actor is r's actor caller, nil for a Go caller (or once nobody is left
// to tell).
func (r *request) actor() *actorCaller {
	c, _ := r.by.(*actorCaller)
	return c
}

// caller is who waits for a request's answer: a Go caller on a reply
// channel (Acquire) or an actor that sent an AcquireRequest.
type caller interface {
	deliver(a *lockActor, r *request, res AcquireResult)
}

// goCaller is a Go Acquire: its reply channel is buffered, so the actor
// never blocks on it.
type goCaller struct {
	id    uint64 // the Acquire's ID
	end   context.CancelCauseFunc
	reply chan<- AcquireResult
	span  trace.SpanContext // the caller's span: its script calls carry it (observe.go)
}

func (c *goCaller) deliver(_ *lockActor, _ *request, res AcquireResult) { c.reply <- res }

// actorCaller is an AcquireRequest's sender. Its owner is its token's, and
// a sender in another process (remote) must prove it is alive with
// RenewRequests (lock_liveness.go).
type actorCaller struct {
	from         *actor.PID
	protoID      string
	token        ownerToken
	remote       bool
	suspectUntil time.Time // a Terminated came for the sender: forgotten then unless its owner renews
	unreachable  bool      // its node's connection broke: nothing more is sent to from
}

func (c *actorCaller) deliver(a *lockActor, r *request, res AcquireResult) {
	if c.from == nil || c.unreachable {
		return // its caller is gone
	}
	resp := &messages.AcquireResponse{RequestId: c.protoID, Error: protoError(res.Err), HoldCount: res.HoldCount}
	if res.Err == nil {
		resp.Acquired, resp.FencingToken = true, res.Token
		resp.OwnerToken, resp.Owner = c.token.String(), r.owner
		if h := a.holds.get(r.owner); h != nil && h.by != nil {
			remember(&h.by.acquired, c.protoID, res)
		}
	}
	resp.TtlMs = res.HolderTTL.Milliseconds()
	if res.HolderTTL < 0 {
		resp.TtlMs = -1
	}
	a.env.System.Root.Send(c.from, resp)
}

// span is the span context of r's Go caller, for the scripts run for it.
func (r *request) span() trace.SpanContext {
	if c, ok := r.by.(*goCaller); ok {
		return c.span
	}
	return trace.SpanContext{}
}

// from is the PID of r's actor caller, nil for a Go caller.
func (r *request) from() *actor.PID {
	if c := r.actor(); c != nil {
		return c.from
	}
	return nil
}

// answer replies to a pending request once and forgets it. A fair waiter
// that gives up hears its answer once it has left the Redis queue
// (giveUpPlace).
func (a *lockActor) answer(ctx actor.Context, r *request, res AcquireResult) {
	a.forget(r)
	a.watched.unwatch(ctx, r.from())
	if res.Err != nil && a.fam.queues() {
		a.giveUpPlace(r, res)
		return
	}
	a.deliver(r, res)
}

// forget drops a request from the books without replying.
func (a *lockActor) forget(r *request) {
	if a.queue.forget(r) {
		a.headReady = true // the next waiter may try
	}
}

// front is the first waiter of the FIFO, or nil.
func (a *lockActor) front() *request {
	r, _ := a.queue.head()
	return r
}

func (a *lockActor) deliver(r *request, res AcquireResult) {
	if r.by != nil {
		r.by.deliver(a, r, res)
	}
}
