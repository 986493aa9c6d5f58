package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/scripts"
)

// fair is the fair lock (Redisson's RFairLock). Every local waiter joins
// the Redis queue on arrival, one script at a time, so the global order is
// the order of arrival across processes. An unlock tells only the head of
// that queue, on the head's own channel <lock channel>:<owner>.
//
// Subscriptions: this runtime's waiters of a name are in the Redis queue in
// the order they arrived here, so only the earliest of them can be the next
// head. Subscribing to that one waiter's channel (a plain SUBSCRIBE, moved
// to the next waiter when it is served or leaves) costs one subscription per
// name however many local waiters there are. A pattern subscription
// (PSUBSCRIBE <lock channel>:*) would too, but Redis matches every PUBLISH on
// the server against every pattern, so many contended names would slow all
// publishing; a message published while the subscription moves is caught by
// the re-check that each (re)subscription triggers.
type fair struct{}

func (fair) acquire(ctx context.Context, rdb scripts.Client, c attemptArgs, g scripts.Guard) (scripts.Grant, error) {
	return scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: c.AcquireArgs, Wait: c.wait, Enqueue: c.enqueue}, g)
}

func (fair) release(ctx context.Context, rdb scripts.Client, c releaseArgs, g scripts.Guard) (scripts.Unlock, scripts.Grant, error) {
	fu, err := scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: c.UnlockArgs, Next: c.next, KeepPlace: c.keep}, g)
	return fu.Unlock, fu.Next, err
}

func (fair) force(ctx context.Context, rdb scripts.Client, name string, _ bool) (bool, error) {
	return scripts.ForceUnlockFair(ctx, rdb, name)
}

func (fair) blocked(holds *holdSet, r *request) bool { return heldByOther(holds, r) }

func (fair) upgrade(*hold, *request) bool { return false }

// pass: nobody passes; the Redis queue's order is the order.
func (fair) pass(*lockActor, *request) *request { return nil }

// handsTo: the earliest local waiter is offered the lock once it has a
// place in the Redis queue; the script grants it only if that place is the
// head, so the global order holds.
func (fair) handsTo(_ *lockActor, next *request) bool { return next.enqueued }

// wantTopic is the channel of the earliest local waiter once it has a
// place in the Redis queue, while no local owner holds the lock: a local
// holder's release hands the lock to that waiter directly when it is the
// head, so a lock passed around in one process never subscribes.
func (fair) wantTopic(a *lockActor) topic {
	if a.queue.waiting() == 0 || a.holds.len() > 0 {
		return ""
	}
	head := a.front()
	if !head.enqueued {
		return ""
	}
	return topic(scripts.FairChannel(a.key.Name, head.owner))
}

func (fair) queues() bool { return true }
func (fair) shares() bool { return false }

// releasedPublicly: the script told the head of the Redis queue; if that
// is one of ours, its channel message wakes it.
func (fair) releasedPublicly(*lockActor, int64) {}

func (fair) unheld(h *hold, s *releaseStep) bool {
	h.count = max(h.count-s.holds, 1)
	return false
}

func (fair) forceEnds(*hold, bool) bool { return true }

// ---- giving up a place -------------------------------------------------------

// leaveOverdue ends the wait of a fair waiter's answer for its leave
// (giveUpPlace).
type leaveOverdue struct{ req *request }

// giveUpPlace answers a fair waiter that gives up (timed out, cancelled, its
// caller gone, Close) once it has left the Redis queue, as Redisson's
// tryLock does before it returns false: a waiter behind it, of any client,
// must not wait for a place nobody will take. If a script for it is in
// flight (its attempt, or a release handing it the lock), that script's
// outcome decides (settleGaveUp): it may have joined, or been granted, and
// then the undo gives the lock back and there is no place to leave.
// Another request of the same owner keeps the place, and this answer goes
// at once.
//
// The answer waits for one try of the leave, and at most the call timeout
// in all: a Redis that does not answer delays a caller past its wait time
// (or its context) by the call timeout at most; the leave is then retried
// in the background (leaveStep).
func (a *lockActor) giveUpPlace(r *request, res AcquireResult) {
	if !r.inflight && !a.leaveIfQueued(r, false) {
		a.deliver(r, res)
		return
	}
	r.gaveUp = &res
	r.overdue = a.env.timers.SendOnce(a.env.CallTimeout, a.self, &leaveOverdue{req: r})
	a.heldAnswers++
}

// settleGaveUp follows the outcome of the script that was in flight for a
// waiter that gave up meanwhile: its attempt (attempted has undone a grant,
// or left the queue after a refusal), or a release handing it the lock
// (released has undone the hand-off). A grant took its place off the
// queue; otherwise it leaves the place it may still have (an attempt that
// failed without running, a hand-off to a waiter that was not the head).
// Its answer goes once no leave of it is under way.
func (a *lockActor) settleGaveUp(r *request, granted bool) {
	if r != nil && r.gaveUp != nil && !r.left && (granted || !a.leaveIfQueued(r, false)) {
		a.deliverGaveUp(r)
	}
}

// deliverGaveUp delivers r's held answer, if it still has one.
func (a *lockActor) deliverGaveUp(r *request) {
	if r == nil || r.gaveUp == nil {
		return
	}
	res := *r.gaveUp
	r.gaveUp = nil
	r.overdue()
	a.heldAnswers--
	a.deliver(r, res)
}

// deliverAllGaveUp delivers the held answers when the actor stops, with the
// steps they wait for.
func (a *lockActor) deliverAllGaveUp() {
	for _, s := range a.steps {
		deliverGaveUpOf(a, s)
	}
	deliverGaveUpOf(a, a.inflight)
}

func deliverGaveUpOf(a *lockActor, s step) {
	switch s := s.(type) {
	case *leaveStep:
		a.deliverGaveUp(s.req)
	case *attemptStep:
		a.deliverGaveUp(s.req)
	case *releaseStep:
		a.deliverGaveUp(s.next) // a hand-off to it in flight
	}
}

// ---- keeping places ----------------------------------------------------------

// placeWait is how long r's place in the Redis queue lasts after the one
// ahead of it when it joins (Redisson's threadWaitTime): its own wait time
// when it has one, else the fair wait timeout, but never more than a
// watchdog lease. This runtime keeps its live waiters' places a lease
// ahead (refreshStep), so a longer place would outlast only a waiter whose
// process died, and hold up everyone behind it: dying right after it
// joined, before its first refresh, it would keep the line for its whole
// wait.
func (a *lockActor) placeWait(r *request) time.Duration {
	wait := a.env.FairWait
	if !r.deadline.IsZero() {
		wait = max(time.Until(r.deadline), time.Millisecond)
	}
	if mutant.On(13) {
		return wait
	}
	return min(wait, a.env.Watchdog)
}

// syncPlaces keeps the refresh of this actor's waiters' places armed while
// any wait: every Watchdog/3, as renewals, one script per name for all of
// them (refreshStep). A waiter's place then lasts about a watchdog lease
// past its runtime's death, not its whole wait.
func (a *lockActor) syncPlaces() {
	if !a.fam.queues() {
		return
	}
	switch {
	case a.queue.waiting() == 0 || a.draining:
		a.places.cancel()
	case a.places.at == 0:
		a.places.set(a.env.timers, a.self, a.env.Watchdog/3)
	}
}

// refreshStep sets the deadline of every place this actor's waiters hold
// to now + the watchdog lease (scripts.RefreshFair).
type refreshStep struct {
	missing int64 // outcome: waiters without a place
}

func (s *refreshStep) start(a *lockActor, _ actor.Context) scriptCall {
	var owners []string
	seen := map[string]bool{}
	for e := a.queue.fifo.Front(); e != nil; e = e.Next() {
		if r := e.Value.(*request); r.enqueued && !r.left && !seen[r.owner] {
			seen[r.owner] = true
			owners = append(owners, r.owner)
		}
	}
	if len(owners) == 0 {
		return nil
	}
	rdb, name, window := a.env.Redis, a.key.Name, a.env.Watchdog
	return func(ctx context.Context, _ scripts.Guard) (err error) {
		s.missing, err = scripts.RefreshFair(ctx, rdb, name, window, owners)
		return err
	}
}

// apply: a waiter without a place was dropped (its deadline passed while
// Redis or this runtime stalled, a Redisson client's shift took it past, or
// an operator dropped it): the earliest local waiter tries now, joining
// again if it is the one; the others join again when their turn here
// comes. A failed refresh is tried again next period.
func (s *refreshStep) apply(a *lockActor, _ actor.Context, d *stepDone) {
	if d.err == nil && s.missing > 0 {
		a.headReady = true
	}
}
