package actors

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// lockActor owns one lock name of one family in this runtime: the reentrant
// lock, the fair lock, or both sides of a read-write lock. It is a
// sequential state machine with at most one Redis script (a step) in
// flight:
//
//   - local requests wait in a FIFO; only the waiter the family picks (the
//     head; for the fair lock, the earliest local waiter, since every waiter
//     joins the Redis queue on arrival) contends in Redis, and only when
//     something suggests it may succeed (its arrival, an unlock message, the
//     holder's TTL running out, a (re)subscription);
//   - re-entries of an owner that holds the lock pass the queue at once;
//   - a local holder's release can hand the lock straight to a local waiter
//     in the same script, so the lock is never free in between (see
//     releaseTarget);
//   - every hold has a local validity deadline (when the last successful
//     acquire or renewal was sent, plus the lease, minus drift) after which
//     it is reported lost, so Done() fires before Redis lets anyone else in.
//
// What differs per family is behind fam (lock_reentrant.go, lock_fair.go,
// lock_rw.go); the scripts are steps (lock_steps.go); holds are in
// lock_holds.go, callers in lock_caller.go, owner actors in
// lock_liveness.go.
type lockActor struct {
	env  *runtimeEnv
	key  LockKey // the family's key: see familyKey
	fam  family
	self *actor.PID

	idle      idleness // the idle handshake with the manager (idle.go)
	trimmed   uint32   // idle.routed when trim last looked
	untrimmed bool     // pending may keep storage of answered requests
	draining  bool
	live      bool  // the subscription is confirmed
	headReady bool  // the contender should try
	contended bool  // a waiter met another owner: wake-ups come by pub/sub
	asleep    bool  // its holds went to the manager (dormant.go)
	handoffs  int32 // consecutive local hand-offs (reentrant lock)

	holds    holdSet           // by owner; only owners holding now
	queue    waiters[*request] // unanswered requests; those that wait their turn in its FIFO
	steps    []step            // waiting to run, before any waiter's attempt
	inflight step              // the script in flight
	watched  watchers          // owner actors and requesters

	wakes      uint64        // unlock messages and (re)subscriptions so far: see attempted
	subscribed topic         // zero: none
	yieldUntil time.Duration // since epoch (timer.go); see afterPublicRelease
	retry      deadline      // the contender's next try without a message
	places     deadline      // fair lock: the next refresh of its waiters' places (lock_fair.go)
	readerSeen *request      // read-write lock: the earliest reader waiting, as last found (lock_rw.go)
	validity   wakeup        // the earliest validity deadline of the holds (wakeups.go)
	alive      *deadline     // the earliest liveness deadline of remote owners (lock_liveness.go); made on first use

	settling map[string]int // owners whose Redis work is unsettled (giveback.go)
	// attempting counts, per owner, the attempts among that work: what
	// the owner's releases wait for (releaseStep.start); unreleasing its
	// releases, what its give-backs wait for (undoStep.start).
	attempting, unreleasing map[string]int
	spent                   []string // guards of runs no attempt of which can arrive any more (spend)
	parked                  []step   // attempts and releases waiting for their owner's work to settle
	// heldAnswers counts answers of fair waiters that gave up, held until
	// they left the Redis queue (giveUpPlace): their requests are no longer
	// pending, but the actor owes them an answer, so it may not go idle.
	heldAnswers int32
	later       map[step]int // steps waiting on a timer to run (stepDue), and how often
	undoSeq     uint64       // give-backs queued so far (undoStep.seq)
	extending   int32        // Extend scripts in flight

	drained func() // drain: tells the manager once nothing is left to run
}

// family is what a lock family does differently; each is a zero-size
// type, so holding one costs a lock actor one interface value.
type family interface {
	// acquire and release run the family's scripts (off the actor);
	// release also hands the lock to args.next when it names a waiter.
	acquire(ctx context.Context, rdb scripts.Client, args attemptArgs, g scripts.Guard) (scripts.Grant, error)
	release(ctx context.Context, rdb scripts.Client, args releaseArgs, g scripts.Guard) (scripts.Unlock, scripts.Grant, error)
	force(ctx context.Context, rdb scripts.Client, name string, write bool) (deleted bool, err error)

	// blocked reports whether a local hold of another owner rules out
	// granting r, so that asking Redis is pointless.
	blocked(holds *holdSet, r *request) bool
	// upgrade reports whether r asks to upgrade its owner's hold h, which
	// only the owner can end: waiting would deadlock.
	upgrade(h *hold, r *request) bool
	// pass is a waiter that may try before head, which cannot go now, or
	// nil (lock_rw.go).
	pass(a *lockActor, head *request) *request
	// handsTo reports whether a release of the last hold may hand the lock
	// to the local head next in the same script.
	handsTo(a *lockActor, next *request) bool
	// releasedPublicly follows a release that freed the lock without a
	// hand-off; heard: how many clients got the unlock message.
	releasedPublicly(a *lockActor, heard int64)
	// wantTopic is where the actor's wake-ups come from now ("": none).
	wantTopic(a *lockActor) topic
	// queues reports whether waiters join a queue in Redis on arrival
	// (and must leave it when they give up).
	queues() bool
	// shares reports whether owners can hold at once (readers): a grant
	// lets the next waiter try, and renewals carry the read count.
	shares() bool
	// unheld takes the holds release s released off h after it left the
	// lock held, and reports whether local waiters may try.
	unheld(h *hold, s *releaseStep) bool
	// forceEnds reports whether a forced unlock of that side ends h.
	forceEnds(h *hold, write bool) bool
}

// familyKey is the key of the actor serving k: the read and write sides of
// a read-write lock share one actor, so it can grant compatible waiters.
func familyKey(k LockKey) LockKey {
	if k.Kind == messages.Kind_KIND_WRITE {
		k.Kind = messages.Kind_KIND_READ
	}
	return k
}

func familyOf(kind messages.Kind) family {
	switch kind {
	case messages.Kind_KIND_FAIR:
		return fair{}
	case messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
		return readWrite{}
	}
	return reentrant{}
}

// timer messages; request identity makes late firings harmless
type waiterDeadline struct{ req *request }

// manager handshake
type (
	drainLock   struct{}
	lockDrained struct{ key LockKey }
)

// newLockActor allocates only what a held name needs: watched is made by
// the first watch, and trim drops the storage of what empties.
func newLockActor(env *runtimeEnv, key LockKey) *lockActor {
	return &lockActor{
		env:   env,
		key:   key,
		fam:   familyOf(key.Kind),
		queue: newWaiters[*request]().marking(reads),
	}
}

// trim drops the storage that requests left behind once they are all
// answered: a Go map keeps its slots when emptied (a few hundred bytes per
// name), and a process may hold 100k names that have nothing pending.
func (a *lockActor) trim() {
	if len(a.steps) == 0 {
		a.steps = nil
	}
	if len(a.watched) == 0 {
		a.watched = nil
	}
	if a.trimmed != a.idle.routed {
		a.trimmed, a.untrimmed = a.idle.routed, true
	}
	// A fresh empty map costs a small header, once per burst of requests.
	if a.untrimmed && len(a.queue.pending) == 0 {
		a.queue.pending, a.untrimmed = map[reqKey]*request{}, false
	}
}

func (a *lockActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	counted := isLockRouted(msg)
	a.idle.note(counted)
	if a.asleep {
		_, drain := msg.(*drainLock)
		_, taken := msg.(*sleepTaken)
		switch {
		case taken:
			// The holds are the manager's now; stopping releases nothing.
			a.holds = holdSet{}
			ctx.Stop(a.self)
			return
		case counted || drain:
			// The manager kept this actor (more was routed here, or Close
			// drains: the manager takes no holds then): the holds are still
			// its own, and a validity deadline ignored meanwhile is checked
			// again.
			a.asleep = false
			a.armValidity()
		default:
			if _, stopping := msg.(*actor.Stopping); !stopping {
				// Handed to the manager or not, the holds are not this
				// actor's to change until it knows (see sleep).
				return
			}
		}
	}
	switch m := msg.(type) {
	case *actor.Started:
		// The manager forwards the first request right after the spawn: no
		// idle timer to arm now.
		a.self = ctx.Self()
		if a.holds.len() > 0 {
			a.armValidity() // woken from a dormant record (dormant.go)
		}
		return
	case *actor.Stopping:
		a.stop(ctx)
		return
	case *idleDue:
		if !a.idle.due(ctx, a.env, m) {
			return
		}
		if a.canSleep() {
			a.sleep(ctx)
			return
		}
		timedOut(&a.idle, ctx, a.key, a.isIdle())
	case *Acquire:
		a.admit(ctx, &request{
			waitState: waitState{key: reqKey{id: strconv.FormatUint(m.ID, 10)}}, kind: m.Key.Kind, owner: m.Owner, lease: m.Lease,
			deadline: m.Deadline, tryOnce: m.TryOnce, by: &goCaller{id: m.ID, end: m.End, reply: m.Reply, span: m.Span},
		})
	case *messages.AcquireRequest:
		a.admitMessage(ctx, m)
	case *Release:
		a.releaseGo(m)
	case *messages.ReleaseRequest:
		a.releaseMessage(ctx, m)
	case *Cancel:
		a.cancel(ctx, reqKey{id: strconv.FormatUint(m.ID, 10)})
	case *messages.CancelRequest:
		a.cancelMessage(ctx, m)
	case *messages.RenewRequest:
		a.renewMessage(ctx, m)
	case *ForceUnlock:
		a.steps = append(a.steps, &forceStep{write: m.Key.Kind == messages.Kind_KIND_WRITE, reply: m.Reply})
	case *Extend, *extendDone:
		a.onExtend(ctx, m)
	case *stepDone:
		if a.inflight == m.step {
			a.inflight = nil
			a.stepped(ctx, m)
		}
	case *waiterDeadline:
		a.deadlinePassed(ctx, m.req)
	case *leaveOverdue:
		a.deliverGaveUp(m.req)
	case *timerFired:
		switch {
		case a.retry.fired(m):
			a.headReady = true
		case a.alive != nil && a.alive.fired(m):
			a.expireOwners(ctx)
		case a.places.fired(m):
			a.steps = append(a.steps, &refreshStep{})
		}
	case *wakeupDue:
		if a.validity.due(m) {
			a.expireHolds(ctx) // which re-arms, or disarms, a.validity
		}
	case *stepDue:
		if a.later[m.step]--; a.later[m.step] <= 0 {
			delete(a.later, m.step)
		}
		a.first(m.step) // Close waits for it too: a give-back must not be dropped
	case *subscribed:
		a.live = m.Topic == a.subscribed
		a.headReady = true
		a.wakes++
	case *published:
		a.headReady = true
		a.wakes++
	case *renewConfirmed:
		if renewed(a.env, &a.holds, m.Owner, m.Gen, m.SentAt, m.Reads) {
			a.armValidity()
		}
	case *renewGone:
		if h := a.holds.get(m.Owner); h != nil && h.gen == m.Gen {
			a.lost(ctx, h, LossGone, "the lock is gone from Redis (deleted, expired or taken by another owner)")
		}
	case *actor.Terminated:
		a.ownerStopped(ctx, m)
	case *drainLock:
		a.drain(ctx)
	}
	a.kick(ctx)
	a.trim()
}

// isLockRouted tells the lock actor which messages the manager counted when
// routing them (the idle handshake compares the counts).
func isLockRouted(msg any) bool {
	switch msg.(type) {
	case routed, *messages.AcquireRequest, *messages.ReleaseRequest, *messages.CancelRequest, *messages.RenewRequest:
		return true
	}
	return false
}

// ---- admission -------------------------------------------------------------

// admitMessage admits an AcquireRequest (the manager validated it). Its
// owner is its token's: a new one drawn here, or the one it presents.
func (a *lockActor) admitMessage(ctx actor.Context, m *messages.AcquireRequest) {
	from := ctx.Sender()
	token := newOwnerToken()
	if m.OwnerToken != "" {
		var err error
		if token, err = parseOwnerToken(m.OwnerToken); err != nil {
			ctx.Respond(&messages.AcquireResponse{RequestId: m.RequestId, Error: protoError(err)})
			return
		}
	}
	owner := tokenOwner(a.env.RuntimeID, token)
	r := &request{
		waitState: waitState{key: reqKey{from: owner, id: m.RequestId}},
		kind:      m.Kind,
		owner:     owner,
		lease:     time.Duration(m.LeaseMs) * time.Millisecond,
		tryOnce:   m.WaitMs == 0 && !m.WaitIndefinitely,
		by:        &actorCaller{from: from, protoID: m.RequestId, token: token, remote: !a.isLocal(from)},
	}
	if m.WaitMs > 0 {
		r.deadline = time.Now().Add(time.Duration(m.WaitMs) * time.Millisecond)
	}
	a.admit(ctx, r)
}

func (a *lockActor) admit(ctx actor.Context, r *request) {
	if a.draining {
		a.deliver(r, AcquireResult{Err: ErrClosed})
		return
	}
	if _, dup := a.queue.get(r.key); dup {
		a.deliver(r, AcquireResult{Err: fmt.Errorf("%w: request id %q is already pending", ErrInvalidArgument, r.key.id)})
		return
	}
	h := a.holds.get(r.owner)
	if h != nil && h.byMessage() != (r.actor() != nil) {
		// A Go handle naming an owner id (WithOwner) never enters a hold
		// acquired by message, whose owner is a token, nor the reverse.
		a.deliver(r, AcquireResult{Err: sentinel.Op("acquire", a.key.Name, fmt.Errorf("%w: that owner's holds belong to another kind of caller", ErrNotOwner))})
		return
	}
	if h != nil && h.by != nil {
		if res, ok := answered(h.by.acquired, r.key.id); ok && h.find(func(g *grant) bool { return g.token == res.Token && g.write == r.write() && outlasts(g) }) != nil {
			// Sent again after its answer (lost to the client): the same
			// grant, not another re-entry the client would never release.
			// Only while that grant is held, unreleased: an id used again
			// after its grant was released asks for a new one. (A client
			// that re-enters names the acquisitions it releases, or a
			// release may take the one whose answer it lost: lock.proto.)
			a.deliver(r, res)
			return
		}
	}
	upgrade := a.fam.upgrade(h, r)
	if upgrade && (r.tryOnce || r.deadline.IsZero()) {
		// Nothing but the owner's own read holds stands in the way, and only
		// the owner can end those: waiting would deadlock.
		a.deliver(r, AcquireResult{Err: upgradeError()})
		return
	}
	a.queue.add(r)
	a.watched.watch(ctx, r.from())
	a.queue.expireAt(a.env.timers, a.self, r, r.deadline, &waiterDeadline{req: r})
	switch {
	case h != nil && !upgrade:
		// Re-entry: the owner already holds the lock, so it must not wait
		// behind others (they wait for it).
		a.steps = append(a.steps, &attemptStep{req: r})
	case r.tryOnce && a.fam.blocked(&a.holds, r):
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
	case r.tryOnce:
		a.steps = append(a.steps, &attemptStep{req: r})
	default:
		first := a.queue.waiting() == 0
		a.queue.pushBack(r)
		switch {
		case a.fam.queues():
			// Every fair waiter takes its place in the Redis queue now, so
			// the order is the order of arrival across processes.
			a.steps = append(a.steps, &attemptStep{req: r})
		case first:
			a.headReady = true
		}
	}
}

// cancel abandons a pending request; an actor caller hears ErrCanceled, a Go
// caller (who has stopped listening for anything but one reply) ErrCanceled
// too, or its grant if that came first.
func (a *lockActor) cancel(ctx actor.Context, k reqKey) {
	if r, ok := a.queue.get(k); ok {
		a.answer(ctx, r, AcquireResult{Err: ErrCanceled})
	}
}

func (a *lockActor) deadlinePassed(ctx actor.Context, r *request) {
	if r.answered {
		return
	}
	err := ErrNotAcquired
	if a.fam.upgrade(a.holds.get(r.owner), r) {
		err = upgradeError()
	}
	a.answer(ctx, r, AcquireResult{Err: err, HolderTTL: -1})
}

// ---- the scheduler ---------------------------------------------------------

// kick starts the next script if none is in flight: queued steps first
// (releases, re-entries, single attempts, first places in a fair queue,
// undos), then an attempt of the waiter the family lets contend.
func (a *lockActor) kick(ctx actor.Context) {
	for a.inflight == nil {
		if len(a.steps) > 0 {
			s := a.steps[0]
			a.steps = a.steps[1:]
			a.run(ctx, s)
			continue
		}
		r := a.contender()
		if r == nil {
			break
		}
		a.retry.cancel()
		a.run(ctx, &attemptStep{req: r})
	}
	a.syncSubscription(ctx)
	a.syncPlaces()
	if a.draining && a.inflight == nil && len(a.steps) == 0 && len(a.later) == 0 && a.drained != nil {
		if len(a.spent) > 0 {
			a.run(ctx, &spentStep{ids: a.spent}) // its outcome comes back here
			a.spent = nil
		} else {
			a.drained()
			a.drained = nil
		}
	}
	a.syncIdle(ctx)
}

// contender is the queued waiter that should try now, if any: the head,
// when something suggests it may succeed and no local hold rules it out
// (a waiter that queues in Redis must also hold its place there already).
func (a *lockActor) contender() *request {
	if a.queue.waiting() == 0 || since() < a.yieldUntil {
		return nil
	}
	head := a.front()
	if !a.headReady || head.inflight || a.fam.blocked(&a.holds, head) || (a.fam.queues() && !head.enqueued) || a.settlingFor(head.owner) {
		return a.fam.pass(a, head)
	}
	return head
}

func (a *lockActor) armRetry(holderTTL time.Duration) {
	if holderTTL < 0 {
		// No expiry to wait for: re-check now and then in case a message
		// is missed.
		holderTTL = a.env.Watchdog
	}
	a.retry.set(a.env.timers, a.self, holderTTL)
}

// ---- outcomes of attempts ----------------------------------------------------

func (a *lockActor) attempted(ctx actor.Context, s *attemptStep, d *stepDone) {
	r := s.req
	if d.err != nil {
		if !r.answered {
			a.answer(ctx, r, AcquireResult{Err: sentinel.Op("acquire", a.key.Name, d.err)})
		}
		// The attempt may have taken effect: undo exactly that. An
		// answer of Redis (BUSY, say) or a refused dial is a known
		// outcome: nothing was done, and the owner's holds are untouched.
		if unsettled(d.err) {
			// A read's count does not expire with its key: while the
			// owner's other read-hold keys keep the lock, so does the
			// count of this one, whose give-back is tried that long.
			lease := r.leaseOr(a.env.Watchdog)
			if h := a.holds.get(r.owner); h != nil {
				for _, k := range h.reads {
					lease = max(lease, k.until-since())
				}
				// A re-entry: nor can it be told whether the owner's
				// holds were still there (deleted or expired, then the
				// attempt started a fresh hold that would pass for
				// them): the old hold is lost, and given back after the
				// attempt's undo (which goes first, as it is queued
				// later: see first).
				a.abandonHold(ctx, h, LossRenewalFailed, "a re-entry's outcome stayed unknown (Redis did not answer), so whether the hold was still there cannot be told")
			}
			a.giveBackUnknown(r.owner, r.write(), s.seen+1, lease)
			a.leaveIfQueued(r, true)
		}
		return
	}
	g := s.grant
	if g.Acquired {
		a.endIfGone(ctx, r, g, s.other)
		if h := a.holds.get(r.owner); h != nil {
			h.mark = g.Mark // even if undone below: a write's counter moved
		}
		if r.answered {
			a.giveBack(r.owner, r.write(), 1, g.HoldCount, g.Mark, r.leaseOr(a.env.Watchdog))
			return
		}
		if a.settlingFor(r.owner) && !mutant.On(10) {
			// The attempt was in flight when a give-back of its owner
			// began: the two must not overlap (giveback.go).
			a.giveBackGrant(ctx, r, g, "a give-back of its owner's holds was under way")
			return
		}
		if a.env.unsynced(s.acked) {
			a.unconfirmed(ctx, r, g, s.acked)
			return
		}
		if a.holds.get(r.owner) == nil {
			a.handoffs = 0
		}
		if r.met {
			a.env.Observe.handoff(a.key, "", r.owner, false)
		}
		a.granted(ctx, r, g, d.sentAt)
		return
	}
	if h := a.holds.get(r.owner); h != nil && !a.fam.upgrade(h, r) {
		// A re-entry found another owner in Redis: this hold is gone.
		a.lost(ctx, h, LossTaken, "the lock is held by another owner")
	}
	if r.answered {
		a.leaveIfQueued(r, !r.tryOnce)
		return
	}
	if r.tryOnce {
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: g.HolderTTL})
		return
	}
	if !a.queue.queued(r) {
		// A re-entry whose hold turned out lost waits like anyone else.
		a.requeue(r)
	}
	if a.fam.queues() {
		a.placed(r, g)
		if a.front() != r {
			return // it waits for those ahead of it here, who wait for their turn
		}
	}
	// The head waits until something suggests it may succeed: an unlock
	// message, or the holder's lease (the fair lock: the turn of those
	// ahead) running out, which also bounds what a missed message costs.
	// An unlock message that came while the attempt was in flight may
	// tell of an unlock the attempt ran before: it must not be lost, or
	// the head waits out the holder's TTL for a free lock.
	a.headReady = a.wakes != s.wakes
	a.contended = true
	r.met = true
	a.armRetry(g.HolderTTL)
}

// placed keeps the order of the fair lock's local waiters that have a
// place in the Redis queue the order of their places, which decides who is
// next: only the local front contends, and only its channel is heard, so a
// front behind another local waiter in Redis would keep the free lock from
// both. A waiter that just joined goes behind every local waiter placed
// before it (its join may have run after theirs: it was held back, parked
// while its owner's give-back was out, or retried after a late grant); one
// the script reports as the head goes to the front.
func (a *lockActor) placed(r *request, g scripts.Grant) {
	if (g.Joined || !r.enqueued) && !a.behindPlaced(r) && !mutant.On(12) {
		r.enqueued = false // not counted among those placed before it
		a.queue.unqueue(r)
		a.requeue(r)
	}
	r.enqueued = true
	if g.Head && a.front() != r && !mutant.On(12) {
		a.queue.unqueue(r)
		a.queue.pushFront(r)
	}
}

// behindPlaced reports whether r waits right behind the local waiters
// that have a place (or first): where a waiter that joins in arrival order
// already is, so that the usual join moves nothing and scans nothing.
func (a *lockActor) behindPlaced(r *request) bool {
	e := r.wait().elem
	if e == nil {
		return false
	}
	prev := e.Prev()
	next := e.Next()
	return (prev == nil || prev.Value.(*request).enqueued) && (next == nil || !next.Value.(*request).enqueued)
}

// requeue puts a re-entry whose hold turned out lost, and which must now
// wait, into the FIFO where its place in line is: the front, where no
// queue in Redis orders the waiters; else (the fair lock) behind the
// waiters that joined the Redis queue before its attempt did, since that
// queue decides who is next, and only the local front contends and is
// watched for its turn. Those not yet joined (their first attempt still
// to run) join after it. It scans only them, on this rare path.
func (a *lockActor) requeue(r *request) {
	if !a.fam.queues() || mutant.On(6) {
		a.queue.pushFront(r)
		return
	}
	e := a.queue.fifo.Back()
	for e != nil && !e.Value.(*request).enqueued {
		e = e.Prev()
	}
	if e == nil {
		a.queue.pushFront(r)
		return
	}
	a.queue.pushAfter(r, e)
}

// endIfGone ends the hold of r's owner as lost when grant g shows that its
// holds were gone from Redis (deleted, or expired before the watchdog
// noticed) before g started a fresh hold: g carries another mark than
// theirs (reentrant and fair locks: it began the holds it re-entered, or
// re-entered those of the owner id taken afresh through another runtime or
// by a Redisson thread), or g counts no more than the holds known (a
// re-entry finding the lock gone), or (a read-write lock) fewer holds of
// the other side than other, as the owner had when the attempt started
// (-1: unknown). Whatever then becomes of g (granted, or given back because
// its caller is gone), the old hold is not kept: its renewal, finding g's
// hold, would keep it for ever.
func (a *lockActor) endIfGone(ctx actor.Context, r *request, g scripts.Grant, other int64) {
	h := a.holds.get(r.owner)
	if h == nil || mutant.On(2) {
		return
	}
	// An owner id this runtime made is used by nobody else, so a count
	// not beyond the one known (a read: fewer write holds than the owner
	// had) shows its holds were gone; an id given with WithOwner may be held
	// through other runtimes too, whose releases lower the count: only a
	// grant that found no lock at all tells then.
	own := strings.HasPrefix(r.owner, a.env.RuntimeID+":") || mutant.On(15)
	if g.Fresh || !a.fam.shares() && g.Mark != h.mark || own && (g.HoldCount <= h.counted(r.write()) || (g.Other >= 0 && g.Other < other)) {
		a.lost(ctx, h, LossGone, "a grant found the owner's holds gone from Redis")
	}
}

func (a *lockActor) granted(ctx actor.Context, r *request, g scripts.Grant, sentAt time.Time) {
	lease := r.leaseOr(a.env.Watchdog)
	validUntil := sentAt.Add(lease - Drift(lease))
	if !time.Now().Before(validUntil) {
		a.giveBackGrant(ctx, r, g, "the grant came back after its lease had run out (Redis was slow to answer)")
		return
	}
	h := a.holds.get(r.owner)
	if h == nil {
		h = &hold{owner: r.owner}
		if c := r.actor(); c != nil {
			h.by = &ownerActor{from: c.from, remote: c.remote, unreachable: c.unreachable}
			a.watched.watch(ctx, c.from)
		}
		a.holds.put(h)
	}
	if c := r.actor(); c != nil && c.remote {
		// Acquiring proves the owner alive now; a Terminated of the sender
		// before the grant still needs a RenewRequest to be overruled.
		h.by.aliveUntil = time.Now().Add(a.env.Watchdog)
		if !c.suspectUntil.IsZero() {
			h.by.suspect = true
			h.by.aliveUntil = c.suspectUntil
		}
		defer a.armAlive()
	}
	if r.write() {
		h.writes = g.HoldCount
	} else {
		h.count = g.HoldCount
	}
	if a.fam.shares() && !r.write() {
		// Read hold n's key was (re)written with this lease.
		h.reads = append(h.reads[:min(int64(len(h.reads)), g.HoldCount-1)], readKey{until: validUntil.Sub(epoch), token: g.Token, sent: sentAt.Sub(epoch)})
	}
	h.mark = g.Mark
	h.extend(validUntil)
	gr := &grant{token: g.Token, watchdog: r.lease == 0, write: r.write(), lease: lease}
	if c, ok := r.by.(*goCaller); ok {
		gr.goID, gr.end = c.id, c.end
	}
	h.grants = append(h.grants, gr)
	if gr.watchdog {
		h.watchdogs++
	}
	a.syncRenewal(h)
	a.armValidity()
	a.answer(ctx, r, AcquireResult{Token: g.Token, HoldCount: g.HoldCount, HolderTTL: lease, Valid: &h.valid})
	// Requests of this owner still queued are re-entries now.
	for e := a.queue.fifo.Front(); e != nil; {
		next := e.Next()
		if q := e.Value.(*request); q.owner == r.owner && !q.inflight && !a.fam.upgrade(h, q) {
			a.queue.unqueue(q)
			a.steps = append(a.steps, &attemptStep{req: q})
		}
		e = next
	}
	// Readers behind a granted reader may share the lock: let the next one
	// try at once.
	a.headReady = a.fam.shares()
}

// unconfirmed handles a grant that too few replicas confirmed: a failover
// now could lose it, so it is undone, and tried again after a pause (with
// back-off) up to ReplicaSync.Attempts times before r fails.
func (a *lockActor) unconfirmed(ctx actor.Context, r *request, g scripts.Grant, acked int64) {
	a.giveBack(r.owner, r.write(), 1, g.HoldCount, g.Mark, r.leaseOr(a.env.Watchdog))
	r.unsynced++
	if r.unsynced >= max(a.env.ReplicaSync.Attempts, 1) {
		a.answer(ctx, r, AcquireResult{Err: fmt.Errorf("%w: %w: %d of %d replicas confirmed it within %v",
			ErrNotAcquired, ErrReplicaSync, max(acked, 0), a.env.ReplicaSync.Replicas, a.env.ReplicaSync.Timeout)})
		return
	}
	pause := time.Duration(10<<r.unsynced) * time.Millisecond
	if a.queue.queued(r) {
		a.headReady = false
		a.retry.set(a.env.timers, a.self, pause)
		return
	}
	a.runLater(pause, &attemptStep{req: r})
}
