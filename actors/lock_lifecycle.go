package actors

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/scripts"
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
		a.env.deliver(a.env.router, &unsubscribe{Topic: a.subscribed, Subscriber: a.self})
	}
	a.subscribed, a.live = want, false
	if want != "" {
		a.env.deliver(a.env.router, &subscribe{Topic: want, Subscriber: a.self})
	}
}

func (a *lockActor) isIdle() bool {
	return a.holds.len() == 0 && len(a.queue.pending) == 0 && a.inflight == nil && len(a.steps) == 0 && a.subscribed == "" &&
		len(a.later) == 0 && len(a.settling) == 0 && a.heldAnswers == 0
}

// syncIdle runs the idle handshake (idle.go) while idle, or while all
// this actor has is holds that can go dormant (canSleep); the manager stops
// this actor if nothing was routed to it meanwhile.
func (a *lockActor) syncIdle(ctx actor.Context) {
	a.idle.sync(ctx, a.env, (a.isIdle() || a.canSleep()) && !a.draining)
}

// canSleep reports whether all this actor has is holds of Go callers, so
// that the manager can keep them as a dormant record and this actor stop
// (dormant.go): nothing queued, running, timed, subscribed or watched.
func (a *lockActor) canSleep() bool {
	if a.holds.len() == 0 || a.draining || len(a.queue.pending) > 0 || a.inflight != nil || len(a.steps) > 0 ||
		a.subscribed != "" || len(a.later) > 0 || a.extending > 0 || len(a.settling) > 0 || a.heldAnswers > 0 || len(a.parked) > 0 ||
		len(a.watched) > 0 || a.retry.at != 0 || (a.alive != nil && a.alive.at != 0) || since() < a.yieldUntil {
		return false
	}
	for h := range a.holds.all {
		if h.by != nil {
			return false // an owner actor's: watched, maybe remote (lock_liveness.go)
		}
	}
	return true
}

// sleep offers the holds to the manager as a dormant record, by the idle
// handshake: the manager takes them and stops this actor if nothing was
// routed here since, or drops the offer (and this actor hears of it by the
// routed message, see Receive). Until then the holds are nobody's to
// change: asleep makes this actor ignore all but routed messages.
func (a *lockActor) sleep(ctx actor.Context) {
	a.idle.reported, a.asleep = true, true
	a.env.wakeups.cancel(&a.validity)
	rec := &dormant{key: a.key, holds: a.holds, handoffs: a.handoffs}
	ctx.Send(ctx.Parent(), &lockAsleep{
		childIdle: childIdle[LockKey]{key: a.key, pid: a.self, routed: a.idle.routed},
		rec:       rec,
	})
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
	a.places.cancel()
	a.env.wakeups.cancel(&a.validity)
	if a.alive != nil {
		a.alive.cancel()
	}
	a.idle.cancel()
	for _, r := range a.queue.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for h := range a.holds.all {
		a.releaseAll(h, lostError("the lock actor stopped"))
	}
	a.deliverAllGaveUp()
	if s := releaseIn(a.inflight); s != nil {
		// Its reply would reach a stopped actor: its outcome stays unknown.
		s.closed(a, "before Redis answered the release")
		a.voidUndos(s)
	}
	left := append(a.steps, a.parked...)
	for s := range a.later {
		left = append(left, s)
	}
	a.later = nil
	var undos []*undoStep
	for _, s := range left {
		// Releases of what nobody holds any more, and give-backs: best
		// effort, as nobody is left to retry them.
		var call scriptCall
		if r := releaseIn(s); r != nil {
			// Its callers hear now: an owner actor has nothing but this
			// answer to end its wait (a Go caller's ask ends with Close).
			r.closed(a, "before the release ran")
		}
		switch s := s.(type) {
		case *releaseStep:
			if s.grant == nil {
				call = s.call(a)
			}
		case *undoStep:
			// Not while a release of its owner is being settled: that
			// release may still land, and release what this expects to
			// find (undoStep.start); nor one voided beside a release in
			// flight, whose outcome is never known (voidUndos).
			if a.unreleasing[s.owner] == 0 && !s.void {
				undos = append(undos, s)
			}
		}
		if call != nil {
			g := a.guardFor(s)
			a.env.goCall(nil, func(ctx context.Context) any {
				_ = call(ctx, g)
				return nil
			})
		}
	}
	if len(undos) > 0 {
		// One after another, in the order they would have run: each
		// expects the count the ones before it leave (runsBefore).
		slices.SortFunc(undos, func(x, y *undoStep) int {
			return cmp.Or(strings.Compare(x.owner, y.owner), compareBool(x.write, y.write),
				cmp.Compare(y.ifCount, x.ifCount), cmp.Compare(y.seq, x.seq))
		})
		calls := make([]func(context.Context) error, len(undos))
		for i, u := range undos {
			call, g := u.call(a), a.guardFor(u)
			calls[i] = func(ctx context.Context) error { return call(ctx, g) }
		}
		env := a.env
		env.goCall(nil, func(ctx context.Context) any {
			for _, call := range calls {
				_ = call(ctx)
				ctx = env.callCtx() // each within a call timeout of its own
			}
			return nil
		})
	}
	a.steps, a.parked = nil, nil
	if len(a.spent) > 0 {
		// The last requests' guards: nothing follows to delete them.
		rdb, name, spent := a.env.Redis, a.key.Name, a.spent
		a.env.goCall(nil, func(ctx context.Context) any {
			_ = scripts.DeleteGuards(ctx, rdb, name, spent)
			return nil
		})
		a.spent = nil
	}
	if a.subscribed != "" {
		a.env.deliver(a.env.router, &unsubscribe{Topic: a.subscribed, Subscriber: a.self})
		a.subscribed = ""
	}
}

func samePID(x, y *actor.PID) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.Address == y.Address && x.Id == y.Id
}

func compareBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case y:
		return -1
	}
	return 1
}
