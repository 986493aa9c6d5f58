package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// Subscription, idleness and shutdown of the lock actor.

// syncSubscription keeps this actor subscribed, while local requests wait
// for a lock another owner holds, to where its wake-ups come from (the
// family's wantTopic). An uncontended acquisition never subscribes; a
// contended name stays subscribed until its queue empties, so a busy lock
// does not subscribe once per hand-over.
func (a *lockActor) syncSubscription(ctx actor.Context) {
	if a.queue.waiting() == 0 {
		a.contended = false
	}
	want := a.fam.wantTopic(a)
	if want == a.subscribed {
		return
	}
	if a.subscribed != "" {
		ctx.Send(a.env.router, &Unsubscribe{Topic: a.subscribed, Subscriber: a.self})
	}
	a.subscribed, a.live = want, false
	if want != "" {
		ctx.Send(a.env.router, &Subscribe{Topic: want, Subscriber: a.self})
	}
}

func (a *lockActor) isIdle() bool {
	return a.holds.len() == 0 && len(a.queue.pending) == 0 && a.inflight == nil && len(a.steps) == 0 && a.subscribed == "" &&
		a.due == 0 && len(a.givingBack) == 0
}

// syncIdle runs the idle handshake (idle.go) while idle; the manager
// stops this actor if nothing was routed to it meanwhile.
func (a *lockActor) syncIdle(ctx actor.Context) {
	a.idle.sync(ctx, a.env, a.isIdle() && !a.draining)
}

// drain is Close: fail every request, release every hold, then report.
func (a *lockActor) drain(ctx actor.Context) {
	a.draining = true
	for _, r := range a.queue.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for h := range a.holds.all {
		a.releaseAll(h, ErrClosed)
		a.holds.del(h.owner)
	}
	parent := ctx.Parent()
	a.drained = func() { a.env.System.Root.Send(parent, &lockDrained{key: a.key}) }
}

// stop runs when the actor stops: idle (nothing left), at Close after
// drain, or after a failure. In the last case whatever is still held is
// released best effort, without waiting.
func (a *lockActor) stop(ctx actor.Context) {
	a.retry.cancel()
	a.env.wakeups.cancel(&a.validity)
	a.alive.cancel()
	for _, r := range a.queue.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for h := range a.holds.all {
		a.releaseAll(h, lostError("the lock actor stopped"))
	}
	for _, s := range a.steps {
		if r, ok := s.(*releaseStep); ok && r.grant == nil {
			call := r.call(a)
			a.env.goCall(nil, func(ctx context.Context) any {
				_ = call(ctx, false)
				return nil
			})
		}
	}
	a.steps, a.parked = nil, nil
	if a.subscribed != "" {
		ctx.Send(a.env.router, &Unsubscribe{Topic: a.subscribed, Subscriber: a.self})
		a.subscribed = ""
	}
}

func samePID(x, y *actor.PID) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.Address == y.Address && x.Id == y.Id
}
