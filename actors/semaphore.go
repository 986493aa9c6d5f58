package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// semRecheck bounds what a lost release message costs a semaphore waiter:
// the head re-attempts at least this often.
const semRecheck = time.Second

// MaxPermitIDs is the most permits of a permit-expirable semaphore one call
// acquires or releases: their ids travel in one script call.
const MaxPermitIDs = 1000

// validatePermitIDs checks ids as a release or lease update receives them:
// 1 to MaxPermitIDs distinct ids of 32 hex digits (Redisson's form).
func validatePermitIDs(ids []string) error {
	if len(ids) == 0 || len(ids) > MaxPermitIDs {
		return fmt.Errorf("%w: %d permit ids, want 1 to %d", ErrInvalidArgument, len(ids), MaxPermitIDs)
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		raw, err := scripts.PermitIDBytes(id)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		if _, dup := seen[raw]; dup {
			return fmt.Errorf("%w: permit id %q given twice", ErrInvalidArgument, id)
		}
		seen[raw] = struct{}{}
	}
	return nil
}

// semaphoreActor serves the Acquire waiters of one semaphore (or
// permit-expirable semaphore) in this runtime, as the lock actor does for a
// lock: a local FIFO whose head alone tries in Redis when something suggests
// permits are free (first arrival, a redisson_sc message whose count covers
// it, a (re)subscription, the earliest permit expiry, the recheck timer).
// Single attempts run at once, beside the FIFO. Permits that an attempt
// obtains for a request that has gone are given back.
type semaphoreActor struct {
	env       *runtimeEnv
	key       primitiveKey
	expirable bool
	self      *actor.PID
	idle      idleness
	topic     topic

	queue    waiters[*semReq]
	ops      []*semOp // single attempts waiting to run
	inflight *semOp
	watched  watchers

	headReady  bool
	contended  bool // the head was refused: wake-ups come by pub/sub
	subscribed bool
	retry      deadline // the head's next try without a message
}

type semReq struct {
	waitState
	from      *actor.PID // actor caller; nil for a Go caller
	protoID   string
	n         int64
	lease     time.Duration
	tryOnce   bool
	permitIDs []string // expirable: chosen once, so re-attempts are idempotent

	reply chan<- SemResult
}

// semOp is one attempt, shared with the goroutine running it (as the
// queue actor's popCall is): whoever learns last that a taken permit has
// no taker gives it back, the actor or, once the actor stopped, the
// goroutine (see waiters for why the lock actor needs no such thing).
type semOp struct {
	req *semReq
	ids []string // expirable: the request's permit ids when the attempt began

	mu        sync.Mutex
	abandoned bool
	delivered bool
	res       semDone
}

type (
	semDone struct {
		acquired bool
		grant    scripts.PermitGrant // expirable
		err      error
		// unsure (expirable): an attempt's outcome was unknown and what
		// Redis has of the ids could not be learnt after (acquireExpirable):
		// they may be held, and go back; no attempt can take them any more.
		unsure bool
	}
	semAttempted struct{ op *semOp }
	semDeadline  struct{ r *semReq }
)

func newSemaphoreActor(env *runtimeEnv, key primitiveKey) *semaphoreActor {
	return &semaphoreActor{
		env: env, key: key, expirable: key.Kind == primExpirable,
		topic:   topic(scripts.SemaphoreChannel(key.Name)),
		queue:   newWaiters[*semReq](),
		watched: watchers{},
	}
}

func (a *semaphoreActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	a.idle.note(isPrimitiveRouted(msg))
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
	case *actor.Stopping:
		a.stop(ctx)
		return
	case *SemAcquire:
		a.admit(ctx, &semReq{
			waitState: waitState{key: reqKey{id: strconv.FormatUint(m.ID, 10)}},
			n:         m.N, lease: m.Lease, tryOnce: m.TryOnce, reply: m.Reply,
		}, time.Time{})
	case *SemCancel:
		a.cancel(ctx, reqKey{id: strconv.FormatUint(m.ID, 10)})
	case *messages.SemaphoreAcquireRequest:
		r := &semReq{
			waitState: waitState{key: reqKey{from: pidKey(ctx.Sender()), id: m.RequestId}}, from: ctx.Sender(), protoID: m.RequestId,
			n:     max(m.Permits, 1),
			lease: time.Duration(m.LeaseMs) * time.Millisecond, tryOnce: m.WaitMs == 0 && !m.WaitIndefinitely,
		}
		var deadline time.Time
		if m.WaitMs > 0 {
			deadline = time.Now().Add(time.Duration(m.WaitMs) * time.Millisecond)
		}
		a.admit(ctx, r, deadline)
	case *messages.CancelWaitRequest:
		a.cancel(ctx, reqKey{from: pidKey(ctx.Sender()), id: m.RequestId})
	case *semDeadline:
		if !m.r.answered {
			a.answer(ctx, m.r, SemResult{Err: ErrNotAcquired})
		}
	case *semAttempted:
		a.attempted(ctx, m.op)
	case *timerFired:
		if a.retry.fired(m) {
			a.headReady = true
		}
	case *subscribed:
		a.headReady = true
	case *published:
		// The new count; a head needing more would be refused again. The
		// permit-expirable semaphore wakes on any message: Redisson's
		// release of several ids and its addPermits publish how many
		// permits came back, not the count.
		if head := a.head(); head != nil {
			if n, err := strconv.ParseInt(m.Payload, 10, 64); a.expirable || err != nil || n >= head.n {
				a.headReady = true
			}
		}
	case *actor.Terminated:
		a.requesterStopped(ctx, m)
	case *idleDue:
		idleFired(&a.idle, ctx, a.env, m, a.key, a.isIdle())
		return
	}
	a.kick()
	a.syncSubscription(ctx)
	a.idle.sync(ctx, a.env, a.isIdle())
}

func (a *semaphoreActor) isIdle() bool {
	return len(a.queue.pending) == 0 && a.inflight == nil && len(a.ops) == 0 && !a.subscribed
}

func (a *semaphoreActor) head() *semReq {
	r, _ := a.queue.head()
	return r
}

func (a *semaphoreActor) admit(ctx actor.Context, r *semReq, deadline time.Time) {
	if !a.queue.add(r) {
		a.deliver(r, SemResult{Err: fmt.Errorf("%w: request id %q is already pending", ErrInvalidArgument, r.key.id)})
		return
	}
	if a.expirable {
		r.permitIDs = newPermitIDs(r.n)
	}
	a.watched.watch(ctx, r.from)
	a.queue.expireAt(a.env.timers, a.self, r, deadline, &semDeadline{r: r})
	if r.tryOnce {
		a.ops = append(a.ops, &semOp{req: r})
		return
	}
	if a.queue.waiting() == 0 {
		a.headReady = true
	}
	a.queue.pushBack(r)
}

// kick starts the next attempt if none is in flight: single attempts
// first, then the head when permits may be free.
func (a *semaphoreActor) kick() {
	for a.inflight == nil {
		var op *semOp
		switch {
		case len(a.ops) > 0:
			op = a.ops[0]
			a.ops = a.ops[1:]
		case a.headReady && a.queue.waiting() > 0:
			a.headReady = false
			a.retry.cancel()
			op = &semOp{req: a.head()}
		default:
			return
		}
		if op.req.answered {
			continue
		}
		a.inflight = op
		op.ids = op.req.permitIDs
		a.attempt(op)
	}
}

func (a *semaphoreActor) attempt(op *semOp) {
	env, name, self, r := a.env, a.key.Name, a.self, op.req
	expirable := a.expirable
	env.goCall(nil, func(ctx context.Context) any {
		var (
			d      semDone
			settle func() bool // settles a plain acquisition whose outcome is unknown: whether it took
		)
		if expirable {
			d = env.acquireExpirable(ctx, name, op.ids, r.lease)
		} else {
			d.acquired, settle, d.err = env.acquirePermits(ctx, name, r.n)
		}
		op.mu.Lock()
		if op.abandoned {
			op.mu.Unlock()
			if d.mayHold(expirable) || settle != nil && settle() {
				undoAcquire(env, name, expirable, r.n, op.ids)
			}
			return nil
		}
		op.res, op.delivered = d, true
		op.mu.Unlock()
		env.deliver(self, &semAttempted{op: op})
		if settle != nil && settle() {
			// Its requester was told it failed: the permits go back.
			undoAcquire(env, name, expirable, r.n, nil)
		}
		return nil
	})
}

// acquirePermits takes n permits of semaphore name, as one request under a
// guard of its own. When its outcome stays unknown (its replies were lost,
// or came after the call timeout), it reports the error now, the call
// timeout bounding its caller, and returns settle, which settles it (on the
// same goroutine, later): whether it took the permits, which then must go
// back, so that none is lost. Only if Redis does not answer the settling
// either, for as long as the guard is sure to live, is that beyond knowing
// (logged).
func (e *runtimeEnv) acquirePermits(ctx context.Context, name string, n int64) (taken bool, settle func() bool, err error) {
	g := e.guard(e.NewRequestID())
	first := time.Now()
	call := func(ctx context.Context, g scripts.Guard) (err error) {
		taken, _, err = scripts.AcquirePermits(ctx, e.batched, name, n, g)
		return err
	}
	err = retryGuarded(ctx, g, 19, call)
	if !unsettled(err) || mutant.On(16) {
		return taken, nil, err
	}
	return false, func() bool {
		err := e.settle(first, g, call)
		if err != nil && !errors.Is(err, scripts.ErrNotRun) {
			e.Log.Error("actorlock: a semaphore acquisition's outcome could not be learnt; its permits may be lost", "semaphore", name, "permits", n, "error", err)
		}
		return err == nil && taken
	}, err
}

// acquireExpirable takes the permits ids of permit-expirable semaphore
// name, re-attempted while an attempt's outcome is unknown: the ids make a
// re-attempt take nothing twice while they are held. They do not once they
// were released: an attempt held back on its connection that arrived then
// would take them again, for nobody. So when any attempt's outcome is
// unknown, nothing is concluded until Redis refuses every attempt of the
// call (its deadline: scripts.Clock.ActsUntil); then the acquire runs once
// more, which tells what Redis has of the ids: held (a grant, its lease
// renewed if it ran out meanwhile), or not (refused, or taken afresh). Only
// when that cannot be learnt (expirableRounds rounds of unknown outcomes,
// or a failure after one) is the result unsure: the ids may be held, and
// must go back. Off the actor, on the call's goroutine, which ctx bounds
// first.
func (e *runtimeEnv) acquireExpirable(ctx context.Context, name string, ids []string, lease time.Duration) semDone {
	unsure := false // an earlier round's attempt may have acted (it cannot any more)
	for round := 1; ; round++ {
		var (
			d    semDone
			late bool // an attempt of this round may still act
		)
		d.err = retryUnknown(ctx, func(ctx context.Context, _ int) (err error) {
			d.grant, err = scripts.AcquireExpirablePermits(ctx, e.batched, name, ids, lease, e.Clock)
			d.acquired = d.grant.Acquired
			if err != nil && mayHaveRun(err) && !isReply(err) {
				late = true
			}
			return err
		})
		if !late {
			// Every attempt of the round was answered: a grant or a refusal
			// tells whether the ids are held; a failure does not.
			d.unsure = unsure && d.err != nil
			return d
		}
		d.unsure = true
		until, ok := e.Clock.ActsUntil(ctx)
		if !ok {
			until = time.Now().Add(e.GuardTTL) // not reached: goCall's calls have a deadline
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-t.C:
		case <-e.givingBack.Done():
			// Close waited no longer: the ids go back (mayHold) at once,
			// if that can still run, though an attempt may take them yet.
			t.Stop()
			d.acquired, d.err = false, ErrClosed
			return d
		}
		if e.callsCtx.Err() != nil {
			// Closing: nothing is handed out; the ids go back (mayHold),
			// now that no attempt can take them, while Close waits.
			d.acquired, d.err = false, ErrClosed
			return d
		}
		if round == expirableRounds {
			// A grant may have run out of lease meanwhile: not handed out.
			d.acquired, d.err = false, &unknowable{err: fmt.Errorf("%d rounds of attempts whose outcome was unknown", round)}
			return d
		}
		unsure, ctx = true, e.callCtx()
	}
}

// expirableRounds bounds how many times acquireExpirable waits out attempts
// whose outcome is unknown (each about a call timeout and a half).
const expirableRounds = 3

// mayHold reports whether the attempt may have taken permits that its
// request will not get unless they are given back: it took them, or
// (expirable) an attempt of it whose outcome is unknown may have.
func (d semDone) mayHold(expirable bool) bool {
	return d.acquired || expirable && (d.unsure || d.err != nil && mayHaveRun(d.err))
}

// undoAcquire gives back what a request took and nobody will have: permit
// ids, or n permits, carried through until they are back
// (runtimeEnv.carryThrough).
func undoAcquire(env *runtimeEnv, name string, expirable bool, n int64, ids []string) {
	env.goCall(nil, func(context.Context) any {
		env.permitsBackFailed(name, env.carryThrough(permitsBack(env, name, expirable, n, ids)))
		return nil
	})
}

// permitsBack is the call that gives permit ids, or n permits, back to
// semaphore name, once for the request its guard guards.
func permitsBack(env *runtimeEnv, name string, expirable bool, n int64, ids []string) func(context.Context, scripts.Guard) error {
	return func(ctx context.Context, g scripts.Guard) error {
		if expirable {
			// Ids not held (expired and reclaimed) release nothing.
			_, err := scripts.ReleaseExpirablePermits(ctx, env.batched, name, ids, g)
			return err
		}
		_, err := scripts.AddPermits(ctx, env.batched, name, n, g)
		return err
	}
}

// permitsBackFailed logs a give-back of permits that could not be carried
// through (err, if any): they are lost.
func (e *runtimeEnv) permitsBackFailed(name string, err error) {
	if err != nil {
		e.Log.Error("actorlock: could not give back permits nobody took", "semaphore", name, "error", err)
	}
}

func (a *semaphoreActor) attempted(ctx actor.Context, op *semOp) {
	if a.inflight == op {
		a.inflight = nil
	}
	op.mu.Lock()
	d := op.res
	op.res = semDone{} // consumed: Stopping must not give it back
	op.mu.Unlock()
	r := op.req
	switch {
	case d.err != nil:
		if d.mayHold(a.expirable) {
			// Only once no attempt can take them any more
			// (acquireExpirable); ids not taken release nothing.
			undoAcquire(a.env, a.key.Name, a.expirable, r.n, op.ids)
		}
		// A plain acquisition's unknown outcome is settled by its goroutine
		// (acquirePermits), which gives back what it took.
		if !r.answered {
			a.answer(ctx, r, SemResult{Err: sentinel.Op("acquire", a.key.Name, d.err)})
		}
	case d.acquired && r.answered:
		undoAcquire(a.env, a.key.Name, a.expirable, r.n, op.ids)
	case d.acquired:
		a.answer(ctx, r, SemResult{Acquired: true, PermitIDs: op.ids, Expiry: d.grant.Expiry})
		// The next waiter may get permits too.
		a.headReady = true
	case r.answered:
	case r.tryOnce:
		a.answer(ctx, r, SemResult{})
	default:
		a.contended = true
		wait := semRecheck
		if a.expirable && d.grant.Wait >= 0 {
			// A permit expires then, message or not.
			wait = min(wait, d.grant.Wait+time.Millisecond)
		}
		a.armRetry(wait)
	}
}

func (a *semaphoreActor) armRetry(d time.Duration) {
	a.retry.set(a.env.timers, a.self, d)
}

// syncSubscription keeps the channel subscribed while a refused head waits.
func (a *semaphoreActor) syncSubscription(ctx actor.Context) {
	if a.queue.waiting() == 0 {
		a.contended = false
		a.retry.cancel()
	}
	switch {
	case a.contended && !a.subscribed:
		a.subscribed = true
		a.env.deliver(a.env.router, &subscribe{Topic: a.topic, Subscriber: a.self})
	case !a.contended && a.subscribed:
		a.subscribed = false
		a.env.deliver(a.env.router, &unsubscribe{Topic: a.topic, Subscriber: a.self})
	}
}

func (a *semaphoreActor) cancel(ctx actor.Context, k reqKey) {
	if r, ok := a.queue.get(k); ok {
		a.answer(ctx, r, SemResult{Err: ErrCanceled})
	}
}

func (a *semaphoreActor) answer(ctx actor.Context, r *semReq, res SemResult) {
	a.queue.forget(r)
	a.deliver(r, res)
	a.watched.unwatch(ctx, r.from)
}

func (a *semaphoreActor) deliver(r *semReq, res SemResult) {
	if r.reply != nil {
		r.reply <- res
		return
	}
	if r.from == nil {
		return
	}
	err := res.Err
	if err == nil && !res.Acquired {
		err = ErrNotAcquired
	}
	var permitID string // messages take one permit at a time
	if len(res.PermitIDs) > 0 {
		permitID = res.PermitIDs[0]
	}
	a.env.System.Root.Send(r.from, &messages.SemaphoreAcquireResponse{
		RequestId: r.protoID, Acquired: res.Acquired, PermitId: permitID, Error: primitiveError(err),
	})
}

// requesterStopped handles a Terminated for a requester (watchers.terminated
// says what it proves): the requests of a local actor that stopped are
// forgotten, those of a remote one answered (ERROR_CODE_CANCELED); permits
// their in-flight attempts obtain are given back.
func (a *semaphoreActor) requesterStopped(ctx actor.Context, m *actor.Terminated) {
	verdict := a.watched.terminated(a.env.System, m)
	for _, r := range a.queue.pending {
		if !samePID(r.from, m.Who) {
			continue
		}
		switch verdict {
		case stoppedHere:
			r.from = nil
			a.answer(ctx, r, SemResult{})
		case remoteEnded:
			a.answer(ctx, r, SemResult{Err: errWatchEnded})
		}
	}
}

func (a *semaphoreActor) stop(ctx actor.Context) {
	a.retry.cancel()
	a.idle.cancel()
	for _, r := range a.queue.pending {
		a.answer(ctx, r, SemResult{Err: ErrClosed})
	}
	if op := a.inflight; op != nil {
		op.mu.Lock()
		op.abandoned = true
		d := op.res
		undo := op.delivered && d.mayHold(a.expirable)
		op.res = semDone{}
		op.mu.Unlock()
		if undo {
			undoAcquire(a.env, a.key.Name, a.expirable, op.req.n, op.ids)
		}
	}
	a.inflight, a.ops = nil, nil
	if a.subscribed {
		a.subscribed = false
		a.env.deliver(a.env.router, &unsubscribe{Topic: a.topic, Subscriber: a.self})
	}
}
