package actors

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// lockActor owns one lock name of one family in this runtime: the reentrant
// lock, the fair lock, or both sides of a read-write lock. It is a
// sequential state machine with at most one Redis script in flight:
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
// What differs per family is in the switches on a.fam and in fairlock.go
// and rwlock.go.
type lockActor struct {
	env    *Env
	key    LockKey // the family's key: see familyKey
	fam    family
	self   *actor.PID
	timers *scheduler.TimerScheduler

	routed       uint64 // requests received from the manager (idle handshake)
	trimmed      uint64 // routed when trim last looked
	untrimmed    bool   // pending may keep storage of answered requests
	idleArmed    bool
	idleReported bool

	holds    map[string]*hold     // by owner; only owners holding now
	queue    *list.List           // waiting *request, FIFO, until answered
	pending  map[reqKey]*request  // unanswered requests
	ops      []*op                // waiting to run, before any waiter's attempt
	inflight *op                  // the script in flight
	watched  map[string]*watchRef // owner actors and requesters, by PID
	handoffs int                  // consecutive local hand-offs (reentrant lock)
	gens     uint64               // renewal registrations made

	headReady  bool   // the contender should try
	wakes      uint64 // unlock messages and (re)subscriptions so far: see attempted
	contended  bool   // a waiter met another owner: wake-ups come by pub/sub
	subscribed Topic  // zero: none
	live       bool   // the subscription is confirmed
	yieldUntil time.Time
	retry      deadline // the contender's next try without a message
	validity   deadline // the earliest validity deadline of the holds
	alive      deadline // the earliest liveness deadline of remote owners (see remote owners below)

	givingBack map[string]int // owners with give-backs outstanding (giveback.go)
	parked     []*op          // attempts waiting for their owner's give-back
	due        int            // ops waiting on a timer to run (opDue)

	draining bool
	drained  func()
}

// family is the lock family a lock actor serves.
type family int

const (
	famLock family = iota // reentrant lock
	famFair               // fair lock
	famRW                 // read-write lock, both modes
)

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
		return famFair
	case messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
		return famRW
	}
	return famLock
}

type reqKey struct {
	// from: who asked. A lock message: its owner id (its token proves it;
	// the sender PID proves nothing); a queue or semaphore message: its
	// sender PID; "" for Go callers.
	from string
	id   string
}

type request struct {
	key      reqKey
	kind     messages.Kind
	owner    string
	lease    time.Duration // 0: watchdog
	deadline time.Time     // zero: none
	tryOnce  bool

	goID  uint64 // Go caller
	end   context.CancelCauseFunc
	reply chan<- AcquireResult
	span  trace.SpanContext // Go caller's span (observe.go)
	met   bool              // it met another owner (a hand-off through Redis when granted)

	from    *actor.PID // actor caller
	protoID string
	// Message requests: the owner token (returned when acquired) and whether
	// the sender is in another process (its holds need RenewRequests).
	msg          bool
	token        ownerToken
	remote       bool
	suspectUntil time.Time // a Terminated came for the sender: forgotten then unless its owner renews
	unreachable  bool      // its node's connection broke: nothing more is sent to from

	elem      *list.Element // in the queue
	stopTimer scheduler.CancelFunc
	inflight  bool // an attempt for it is in flight
	unsynced  int  // grants undone because too few replicas confirmed them
	enqueued  bool // fair lock: it has a place in the Redis queue
	left      bool // fair lock: its place has been given up
	answered  bool // a success arriving now must be given back
}

func (r *request) leaseOr(watchdog time.Duration) time.Duration {
	if r.lease > 0 {
		return r.lease
	}
	return watchdog
}

func (r *request) write() bool { return r.kind == messages.Kind_KIND_WRITE }

type grant struct {
	goID     uint64 // the Acquire's ID, Go callers only
	token    int64
	watchdog bool
	write    bool                    // read-write lock: a write hold
	lease    time.Duration           // as granted
	end      context.CancelCauseFunc // Go callers: ends the Held's context
}

type hold struct {
	owner string
	// count is the owner's hold count in Redis as last seen (read-write
	// lock: its read holds; writes counts its write holds).
	count      int64
	writes     int64
	grants     []*grant // acquisitions not yet released, oldest first
	watchdogs  int      // grants renewed by the watchdog
	gen        uint64   // renewal registration; 0: none
	renewReads int64    // read count the registration carries
	validUntil time.Time
	from       *actor.PID // the owning actor of a hold acquired by message
	// Holds acquired by message (msg) belong to an owner token. A remote
	// owner's (see remote owners below) watchdog holds are kept only until
	// aliveUntil, which its RenewRequests move on.
	msg         bool
	remote      bool
	aliveUntil  time.Time
	suspect     bool // a Terminated came for from: aliveUntil applies even without watchdog grants
	unreachable bool // its node's connection broke: nothing more is sent to from
}

// counted is the count of the holds r's kind adds to.
func (h *hold) counted(write bool) int64 {
	if write {
		return h.writes
	}
	return h.count
}

type opKind int

const (
	opAttempt opKind = iota
	opRelease
	opUndo
	opLeave
	opForce
)

type op struct {
	kind      opKind
	req       *request // attempt; release: the waiter the lock may go to
	owner     string   // release, undo, leave
	write     bool     // read-write lock: release or undo a write hold
	grant     *grant   // release: the acquisition released; nil: holds of a departed owner
	holds     int64    // release, undo: how many holds (undo: 0 means 1)
	ifCount   int64    // undo: release only if the count is this
	giveBack  bool     // undo: of a hold nobody may use (giveback.go)
	requestID string   // release, undo: unlock latch id
	seen      int64    // attempt: the owner's count when it started
	wakes     uint64   // attempt: lockActor.wakes when it started
	fromQueue bool     // attempt: req is a queued waiter
	giveUpAt  time.Time
	onRelease func(ReleaseResult)
	onForce   chan<- ForceUnlockResult
	span      trace.SpanContext // release: the Go caller's span
}

func (o *op) reply(res ReleaseResult) {
	if o.onRelease != nil {
		o.onRelease(res)
	}
}

// opDone is the outcome of an op's script.
type opDone struct {
	op     *op
	sentAt time.Time
	grant  scripts.Grant // attempt
	unlock scripts.Unlock
	next   scripts.Grant // release: the lock went straight to op.req
	acked  int64         // replicas that confirmed the script (-1: not asked)
	done   bool          // force: a lock was deleted; leave: the owner was queued
	err    error
}

type watchRef struct {
	pid  *actor.PID
	refs int
	// ended: a Terminated came for a remote pid, so protoactor no longer
	// watches it, but requests and holds of it still count (see
	// remoteStopped).
	ended bool
}

// timer messages; seq/request identity makes late firings harmless
type (
	waiterDeadline struct{ req *request }
	opDue          struct{ op *op } // an op to run first, after a pause
)

// manager handshake
type (
	idleReport struct {
		key    LockKey
		pid    *actor.PID
		routed uint64
	}
	drainLock   struct{}
	lockDrained struct{ key LockKey }
)

// newLockActor allocates only what a held name needs: watched is made by
// the first watch, and trim drops the storage of what empties.
func newLockActor(env *Env, key LockKey) *lockActor {
	return &lockActor{
		env:     env,
		key:     key,
		fam:     familyOf(key.Kind),
		timers:  scheduler.NewTimerScheduler(env.System.Root),
		holds:   map[string]*hold{},
		queue:   list.New(),
		pending: map[reqKey]*request{},
	}
}

// trim drops the storage that requests left behind once they are all
// answered: a Go map keeps its slots when emptied (a few hundred bytes per
// name), and a process may hold 100k names that have nothing pending.
func (a *lockActor) trim() {
	if len(a.ops) == 0 {
		a.ops = nil
	}
	if len(a.watched) == 0 {
		a.watched = nil
	}
	if a.trimmed != a.routed {
		a.trimmed, a.untrimmed = a.routed, true
	}
	// A fresh empty map costs a small header, once per burst of requests.
	if a.untrimmed && len(a.pending) == 0 {
		a.pending, a.untrimmed = map[reqKey]*request{}, false
	}
}

func (a *lockActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	switch msg.(type) {
	case routed, *messages.AcquireRequest, *messages.ReleaseRequest, *messages.CancelRequest, *messages.RenewRequest:
		a.routed++
		a.idleReported = false
	}
	switch m := msg.(type) {
	case *actor.Started:
		// The manager forwards the first request right after the spawn: no
		// idle timer to arm now (it would give every lock actor protoactor's
		// context extras, ~250 bytes, for nothing).
		a.self = ctx.Self()
		return
	case *actor.Stopping:
		a.stop(ctx)
		return
	case *actor.ReceiveTimeout:
		a.idleArmed = false
		ctx.CancelReceiveTimeout()
		if a.idle() {
			a.idleReported = true
			ctx.Send(ctx.Parent(), &idleReport{key: a.key, pid: a.self, routed: a.routed})
		}
	case *Acquire:
		a.admit(ctx, &request{
			key: reqKey{id: strconv.FormatUint(m.ID, 10)}, kind: m.Key.Kind, owner: m.Owner, lease: m.Lease,
			deadline: m.Deadline, tryOnce: m.TryOnce, goID: m.ID, end: m.End, reply: m.Reply, span: m.Span,
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
		a.ops = append(a.ops, &op{kind: opForce, write: m.Key.Kind == messages.Kind_KIND_WRITE, onForce: m.Reply})
	case *Extend, *extendDone:
		a.onExtend(ctx, m)
	case *opDone:
		a.done(ctx, m)
	case *waiterDeadline:
		a.deadlinePassed(ctx, m.req)
	case *timerFired:
		switch {
		case a.retry.fired(m):
			a.headReady = true
		case a.validity.fired(m):
			a.expireHolds(ctx)
		case a.alive.fired(m):
			a.expireOwners(ctx)
		}
	case *opDue:
		a.due--
		if !a.draining {
			a.ops = append([]*op{m.op}, a.ops...)
		}
	case *Subscribed:
		a.live = m.Topic == a.subscribed
		a.headReady = true
		a.wakes++
	case *Published:
		a.headReady = true
		a.wakes++
	case *Renewed:
		if h := a.holds[m.Owner]; h != nil && h.gen == m.Gen {
			h.extend(m.SentAt.Add(a.env.Watchdog - Drift(a.env.Watchdog)))
			a.armValidity()
		}
	case *RenewGone:
		if h := a.holds[m.Owner]; h != nil && h.gen == m.Gen {
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
	owner := TokenOwner(a.env.RuntimeID, token)
	r := &request{
		key:     reqKey{from: owner, id: m.RequestId},
		kind:    m.Kind,
		owner:   owner,
		lease:   time.Duration(m.LeaseMs) * time.Millisecond,
		tryOnce: m.WaitMs == 0 && !m.WaitIndefinitely,
		from:    from,
		protoID: m.RequestId,
		msg:     true,
		token:   token,
		remote:  !a.isLocal(from),
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
	if _, dup := a.pending[r.key]; dup {
		a.deliver(r, AcquireResult{Err: fmt.Errorf("%w: request id %q is already pending", ErrInvalidArgument, r.key.id)})
		return
	}
	h := a.holds[r.owner]
	if h != nil && h.msg != r.msg {
		// A Go handle naming an owner id (WithOwner) never enters a hold
		// acquired by message, whose owner is a token, nor the reverse.
		a.deliver(r, AcquireResult{Err: fmt.Errorf("%w: that owner's holds of lock %q belong to another kind of caller", ErrNotOwner, a.key.Name)})
		return
	}
	upgrade := a.upgrade(r)
	if upgrade && (r.tryOnce || r.deadline.IsZero()) {
		// Nothing but the owner's own read holds stands in the way, and only
		// the owner can end those: waiting would deadlock.
		a.deliver(r, AcquireResult{Err: upgradeError()})
		return
	}
	a.pending[r.key] = r
	if r.from != nil {
		a.watch(ctx, r.from)
	}
	if !r.deadline.IsZero() {
		r.stopTimer = a.timers.SendOnce(time.Until(r.deadline), a.self, &waiterDeadline{req: r})
	}
	switch {
	case h != nil && !upgrade:
		// Re-entry: the owner already holds the lock, so it must not wait
		// behind others (they wait for it).
		a.ops = append(a.ops, &op{kind: opAttempt, req: r})
	case r.tryOnce && a.blocked(r):
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
	case r.tryOnce:
		a.ops = append(a.ops, &op{kind: opAttempt, req: r})
	default:
		first := a.queue.Len() == 0
		r.elem = a.queue.PushBack(r)
		switch {
		case a.fam == famFair:
			// Every fair waiter takes its place in the Redis queue now, so
			// the order is the order of arrival across processes.
			a.ops = append(a.ops, &op{kind: opAttempt, req: r, fromQueue: true})
		case first:
			a.headReady = true
		}
	}
}

// blocked reports whether a local hold of another owner rules out granting
// r, so that asking Redis is pointless.
func (a *lockActor) blocked(r *request) bool {
	if a.fam == famRW {
		return a.rwBlocked(r)
	}
	for owner := range a.holds {
		if owner != r.owner {
			return true
		}
	}
	return false
}

// ---- release and cancel ----------------------------------------------------

func (a *lockActor) releaseGo(m *Release) {
	reply := func(res ReleaseResult) {
		if m.Reply != nil {
			m.Reply <- res
		}
	}
	h := a.holds[m.Owner]
	var g *grant
	if h != nil && !h.msg {
		for i, x := range h.grants {
			if x.goID == m.ID {
				g = x
				h.grants = append(h.grants[:i], h.grants[i+1:]...)
				break
			}
		}
	}
	if g == nil {
		reply(ReleaseResult{Err: lostError("the hold ended before this unlock")})
		return
	}
	a.queueRelease(h, g, m.RequestID, reply).span = m.Span
}

// releaseMessage releases a hold of the owner of the token the request
// presents, whoever sends it: the sender PID proves nothing, the token does.
func (a *lockActor) releaseMessage(ctx actor.Context, m *messages.ReleaseRequest) {
	from := ctx.Sender()
	respond := func(res ReleaseResult) {
		ctx.Send(from, &messages.ReleaseResponse{
			RequestId: m.RequestId, Released: res.Released, HoldCount: res.HoldCount, Error: protoError(res.Err),
		})
	}
	owner, err := OwnerOfToken(a.env.RuntimeID, m.OwnerToken)
	if err != nil {
		respond(ReleaseResult{Err: err})
		return
	}
	h := a.holds[owner]
	write := m.Kind == messages.Kind_KIND_WRITE
	var g *grant
	if h != nil && h.msg {
		// The newest acquisition of that kind goes first.
		for i := len(h.grants) - 1; i >= 0; i-- {
			if h.grants[i].write == write {
				g = h.grants[i]
				h.grants = append(h.grants[:i], h.grants[i+1:]...)
				break
			}
		}
	}
	if g == nil {
		respond(ReleaseResult{Err: fmt.Errorf("%w: that owner_token holds nothing of lock %q (kind %v) here", ErrNotOwner, a.key.Name, m.Kind)})
		return
	}
	// The unlock latch is per owner, so owners reusing request ids never
	// see each other's outcome.
	a.queueRelease(h, g, owner+":"+m.RequestId, respond)
}

// queueRelease takes grant g out of hold h (the watchdog stops renewing it
// now, so no renewal outlives the unlock) and queues its release in Redis.
func (a *lockActor) queueRelease(h *hold, g *grant, requestID string, reply func(ReleaseResult)) *op {
	if g.watchdog {
		h.watchdogs--
	}
	a.syncRenewal(h)
	o := &op{kind: opRelease, owner: h.owner, write: g.write, grant: g, holds: 1, requestID: requestID, onRelease: reply}
	a.ops = append(a.ops, o)
	return o
}

// cancelMessage cancels a pending AcquireRequest of the owner of the token
// it presents, and answers the canceller.
func (a *lockActor) cancelMessage(ctx actor.Context, m *messages.CancelRequest) {
	respond := func(canceled bool, err error) {
		ctx.Respond(&messages.CancelResponse{RequestId: m.RequestId, Canceled: canceled, Error: protoError(err)})
	}
	owner, err := OwnerOfToken(a.env.RuntimeID, m.OwnerToken)
	switch {
	case err != nil:
		respond(false, err)
	case a.pending[reqKey{from: owner, id: m.RequestId}] != nil:
		a.cancel(ctx, reqKey{from: owner, id: m.RequestId})
		respond(true, nil)
	case a.knows(owner):
		respond(false, nil) // answered already
	default:
		respond(false, fmt.Errorf("%w: that owner_token holds or awaits nothing of lock %q here", ErrNotOwner, a.key.Name))
	}
}

// knows reports whether owner holds or waits for the lock here by message.
func (a *lockActor) knows(owner string) bool {
	if h := a.holds[owner]; h != nil && h.msg && len(h.grants) > 0 {
		return true
	}
	for _, r := range a.pending {
		if r.msg && r.owner == owner {
			return true
		}
	}
	return false
}

// cancel abandons a pending request; an actor caller hears ErrCanceled, a Go
// caller (who has stopped listening for anything but one reply) ErrCanceled
// too, or its grant if that came first.
func (a *lockActor) cancel(ctx actor.Context, k reqKey) {
	if r := a.pending[k]; r != nil {
		a.answer(ctx, r, AcquireResult{Err: ErrCanceled})
	}
}

func (a *lockActor) deadlinePassed(ctx actor.Context, r *request) {
	if r.answered {
		return
	}
	err := ErrNotAcquired
	if a.upgrade(r) {
		err = upgradeError()
	}
	a.answer(ctx, r, AcquireResult{Err: err, HolderTTL: -1})
}

// ---- the scheduler ---------------------------------------------------------

// kick starts the next script if none is in flight: queued operations first
// (releases, re-entries, single attempts, first places in a fair queue,
// undos), then an attempt of the waiter the family lets contend.
func (a *lockActor) kick(ctx actor.Context) {
	for a.inflight == nil {
		if len(a.ops) > 0 {
			o := a.ops[0]
			a.ops = a.ops[1:]
			a.start(ctx, o)
			continue
		}
		r := a.contender()
		if r == nil {
			break
		}
		a.retry.cancel()
		a.start(ctx, &op{kind: opAttempt, req: r, fromQueue: true})
	}
	a.syncSubscription(ctx)
	if a.draining && a.inflight == nil && len(a.ops) == 0 && a.drained != nil {
		a.drained()
		a.drained = nil
	}
	a.syncIdle(ctx)
}

// contender is the queued waiter that should try now, if any: the head,
// when something suggests it may succeed and no local hold rules it out
// (the fair lock's head must also hold a place in the Redis queue already).
func (a *lockActor) contender() *request {
	if !a.headReady || a.queue.Len() == 0 || time.Now().Before(a.yieldUntil) {
		return nil
	}
	head := a.queue.Front().Value.(*request)
	if head.inflight || a.blocked(head) || (a.fam == famFair && !head.enqueued) || a.givingBackFor(head.owner) {
		return nil
	}
	return head
}

func (a *lockActor) start(ctx actor.Context, o *op) {
	switch o.kind {
	case opAttempt:
		r := o.req
		if r.answered {
			return
		}
		if a.givingBackFor(r.owner) {
			a.parked = append(a.parked, o)
			return
		}
		h := a.holds[r.owner]
		if h == nil && r.tryOnce && a.blocked(r) {
			a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
			return
		}
		if h != nil {
			o.seen = h.counted(r.write())
		}
		o.wakes = a.wakes
		r.inflight = true
		a.inflight = o
		attempt := a.acquireCall(r, o.seen)
		a.call(o, func(ctx context.Context, d *opDone, n int) (err error) {
			d.grant, d.acked, err = attempt(ctx, n > 0)
			return err
		})
	case opRelease:
		h := a.holds[o.owner]
		if h == nil && o.grant != nil {
			o.reply(ReleaseResult{Err: lostError("the hold ended before this unlock")})
			return
		}
		o.req = a.releaseTarget(h, o)
		if o.req != nil {
			o.req.inflight = true
		}
		a.inflight = o
		release := a.releaseCall(o)
		a.call(o, func(ctx context.Context, d *opDone, n int) (err error) {
			d.unlock, d.next, d.acked, err = release(ctx, n > 0)
			return err
		})
	case opUndo:
		a.inflight = o
		release := a.releaseCall(o)
		a.call(o, func(ctx context.Context, d *opDone, n int) (err error) {
			d.unlock, _, _, err = release(ctx, n > 0)
			return err
		})
	case opLeave:
		a.inflight = o
		name, owner, wait := a.key.Name, o.owner, a.env.FairWait
		a.call(o, func(ctx context.Context, d *opDone, _ int) (err error) {
			d.done, err = scripts.LeaveFair(ctx, a.env.Redis, name, owner, wait)
			return err
		})
	case opForce:
		a.inflight = o
		force := a.forceCall(o.write)
		a.call(o, func(ctx context.Context, d *opDone, _ int) (err error) {
			d.done, err = force(ctx)
			return err
		})
	}
}

// acquireCall is one attempt of r, as a call to run off the actor; it
// captures everything it needs now. A re-attempt (after an unknown outcome)
// tells the script the count seen, so the hold is not counted twice.
func (a *lockActor) acquireCall(r *request, seen int64) func(ctx context.Context, retry bool) (scripts.Grant, int64, error) {
	args := scripts.AcquireArgs{
		Name: a.key.Name, Owner: r.owner, Lease: r.leaseOr(a.env.Watchdog), Seen: -1, TokenTTL: a.env.TokenTTL,
	}
	env, wait, enqueue, write := a.env, a.env.FairWait, !r.tryOnce, r.write()
	fam, span := a.fam, r.span
	return func(ctx context.Context, retry bool) (g scripts.Grant, acked int64, err error) {
		ctx = withSpan(ctx, span)
		if retry {
			args.Seen = seen
		}
		rdb, ack := env.scriptClient()
		switch {
		case fam == famFair:
			g, err = scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: args, Wait: wait, Enqueue: enqueue})
		case fam == famRW && write:
			g, err = scripts.AcquireWrite(ctx, rdb, args)
		case fam == famRW:
			g, err = scripts.AcquireRead(ctx, rdb, args)
		default:
			g, err = scripts.AcquireLock(ctx, rdb, args)
		}
		return g, ack(), err
	}
}

// releaseTarget is the local waiter a release may hand the lock to in the
// same script, or nil. The reentrant lock hands it to its head when the
// owner releases its last hold, at most MaxHandoffs times in a row, then
// releases publicly so waiters in other processes get their turn. The fair
// lock offers it to its earliest local waiter; the script grants it only if
// that waiter is the queue's head, so the global order holds. The
// read-write lock wakes its local waiters instead.
func (a *lockActor) releaseTarget(h *hold, o *op) *request {
	if o.grant == nil || h == nil || h.count != 1 || a.queue.Len() == 0 {
		return nil
	}
	next := a.queue.Front().Value.(*request)
	if next.inflight || next.owner == o.owner {
		return nil
	}
	switch a.fam {
	case famLock:
		if a.handoffs < a.env.MaxHandoffs {
			return next
		}
	case famFair:
		if next.enqueued {
			return next
		}
	}
	return nil
}

// releaseCall runs release (or undo) o off the actor. For a hand-off it
// also returns the grant of o.req, and the replicas that confirmed it.
func (a *lockActor) releaseCall(o *op) func(ctx context.Context, retry bool) (scripts.Unlock, scripts.Grant, int64, error) {
	args := scripts.UnlockArgs{
		Name: a.key.Name, Owner: o.owner, RequestID: o.requestID, Holds: o.holds, IfCount: -1, LatchTTL: a.env.LatchTTL,
	}
	if o.kind == opUndo {
		args.Holds, args.IfCount = max(o.holds, 1), o.ifCount
	}
	var next scripts.AcquireArgs
	if o.req != nil {
		next = scripts.AcquireArgs{Owner: o.req.owner, Lease: o.req.leaseOr(a.env.Watchdog), Seen: -1, TokenTTL: a.env.TokenTTL}
	}
	env, wait, fam, write, span := a.env, a.env.FairWait, a.fam, o.write, o.span
	return func(ctx context.Context, retry bool) (u scripts.Unlock, g scripts.Grant, acked int64, err error) {
		ctx = withSpan(ctx, span)
		rdb, ack := env.scriptClient()
		switch {
		case fam == famFair:
			var fu scripts.FairUnlock
			fu, err = scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: args, Wait: wait, Next: next})
			u, g = fu.Unlock, fu.Next
		case fam == famRW && write:
			u, err = scripts.UnlockWrite(ctx, rdb, args)
		case fam == famRW:
			u, err = scripts.UnlockRead(ctx, rdb, args)
		case next.Owner != "":
			if retry {
				next.Seen = 0
			}
			var h scripts.Handoff
			h, err = scripts.HandoffLock(ctx, rdb, scripts.HandoffArgs{
				Name: args.Name, From: args.Owner, RequestID: args.RequestID, LatchTTL: args.LatchTTL, To: next,
			})
			u, g = scripts.Unlock{State: h.Released}, h.Next
		default:
			u, err = scripts.UnlockLock(ctx, rdb, args)
		}
		return u, g, ack(), err
	}
}

func (a *lockActor) forceCall(write bool) func(ctx context.Context) (bool, error) {
	rdb, name, fam := a.env.Redis, a.key.Name, a.fam
	return func(ctx context.Context) (bool, error) {
		switch fam {
		case famFair:
			return scripts.ForceUnlockFair(ctx, rdb, name)
		case famRW:
			return scripts.ForceUnlockRW(ctx, rdb, name, write)
		}
		return scripts.ForceUnlockLock(ctx, rdb, name)
	}
}

// call runs one script off the actor, re-attempting while its outcome is
// unknown, and delivers the outcome as an opDone.
func (a *lockActor) call(o *op, run func(ctx context.Context, d *opDone, attempt int) error) {
	a.env.goCall(a.self, func(ctx context.Context) any {
		d := &opDone{op: o}
		d.err = retryUnknown(ctx, func(ctx context.Context, attempt int) error {
			d.sentAt = time.Now()
			return run(ctx, d, attempt)
		})
		return d
	})
}

// ---- outcomes --------------------------------------------------------------

func (a *lockActor) done(ctx actor.Context, d *opDone) {
	if a.inflight != d.op {
		return
	}
	a.inflight = nil
	if d.op.req != nil {
		d.op.req.inflight = false
	}
	switch d.op.kind {
	case opAttempt:
		a.attempted(ctx, d)
	case opRelease:
		a.released(ctx, d)
	case opUndo:
		a.undone(d)
	case opLeave:
		a.left(d)
	case opForce:
		a.forced(ctx, d)
	}
}

func (a *lockActor) attempted(ctx actor.Context, d *opDone) {
	r := d.op.req
	if d.err != nil {
		if !r.answered {
			a.answer(ctx, r, AcquireResult{Err: fmt.Errorf("actorlock: acquire %q: %w", a.key.Name, d.err)})
		}
		// The attempt may have taken effect: undo exactly that.
		if mayHaveRun(d.err) {
			a.undo(r.owner, r.write(), d.op.seen+1)
			a.leaveIfQueued(r, true)
		}
		return
	}
	g := d.grant
	if g.Acquired {
		if r.answered {
			a.undo(r.owner, r.write(), g.HoldCount)
			return
		}
		if a.env.unsynced(d.acked) {
			a.unconfirmed(ctx, r, g, d.acked)
			return
		}
		if a.holds[r.owner] == nil {
			a.handoffs = 0
		}
		if r.met {
			a.env.Observe.handoff(a.key, "", r.owner, false)
		}
		a.granted(ctx, r, g, d.sentAt)
		return
	}
	if h := a.holds[r.owner]; h != nil && !a.upgrade(r) {
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
	if r.elem == nil {
		// A re-entry whose hold turned out lost waits like anyone else.
		r.elem = a.queue.PushFront(r)
	}
	if a.fam == famFair {
		r.enqueued = true
		if a.queue.Front().Value.(*request) != r {
			return // it waits for those ahead of it here, who wait for their turn
		}
	}
	// The head waits until something suggests it may succeed: an unlock
	// message, or the holder's lease (the fair lock: the turn of those
	// ahead) running out, which also bounds what a missed message costs.
	// An unlock message that came while the attempt was in flight may
	// tell of an unlock the attempt ran before: it must not be lost, or
	// the head waits out the holder's TTL for a free lock.
	a.headReady = a.wakes != d.op.wakes
	a.contended = true
	r.met = true
	a.armRetry(g.HolderTTL)
}

func (a *lockActor) granted(ctx actor.Context, r *request, g scripts.Grant, sentAt time.Time) {
	lease := r.leaseOr(a.env.Watchdog)
	validUntil := sentAt.Add(lease - Drift(lease))
	if !time.Now().Before(validUntil) {
		a.lateGrant(ctx, r, g, lease)
		return
	}
	h := a.holds[r.owner]
	if h == nil {
		h = &hold{owner: r.owner, from: r.from, msg: r.msg, remote: r.remote, unreachable: r.unreachable}
		a.holds[r.owner] = h
		if r.from != nil {
			a.watch(ctx, r.from)
		}
	}
	if r.remote {
		// Acquiring proves the owner alive now; a Terminated of the sender
		// before the grant still needs a RenewRequest to be overruled.
		h.aliveUntil = time.Now().Add(a.env.Watchdog)
		if !r.suspectUntil.IsZero() {
			h.suspect = true
			h.aliveUntil = r.suspectUntil
		}
		defer a.armAlive()
	}
	if r.write() {
		h.writes = g.HoldCount
	} else {
		h.count = g.HoldCount
	}
	h.extend(validUntil)
	gr := &grant{goID: r.goID, token: g.Token, watchdog: r.lease == 0, write: r.write(), lease: lease, end: r.end}
	h.grants = append(h.grants, gr)
	if gr.watchdog {
		h.watchdogs++
	}
	a.syncRenewal(h)
	a.armValidity()
	a.answer(ctx, r, AcquireResult{Token: g.Token, HoldCount: g.HoldCount, HolderTTL: lease})
	// Requests of this owner still queued are re-entries now.
	for e := a.queue.Front(); e != nil; {
		next := e.Next()
		if q := e.Value.(*request); q.owner == r.owner && !q.inflight && !a.upgrade(q) {
			a.queue.Remove(e)
			q.elem = nil
			a.ops = append(a.ops, &op{kind: opAttempt, req: q})
		}
		e = next
	}
	// Readers behind a granted reader may share the lock: let the next one
	// try at once.
	a.headReady = a.fam == famRW
}

func (a *lockActor) released(ctx actor.Context, d *opDone) {
	o := d.op
	h := a.holds[o.owner]
	if d.err != nil {
		a.releaseFailed(o, h, d.err)
		if o.req != nil && mayHaveRun(d.err) {
			// The waiter may hold it now without knowing: undo, then retry.
			a.undo(o.req.owner, o.req.write(), 1)
			a.headReady = true
		}
		return
	}
	switch d.unlock.State {
	case scripts.Released:
		if h != nil {
			a.dropHold(ctx, h)
		}
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{Released: true})
		a.releasedTo(ctx, o.req, d)
	case scripts.StillHeld:
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{HoldCount: a.stillHeld(ctx, h, o)})
	default:
		a.releasedLost(ctx, o, h)
	}
}

// releasedTo follows a release that freed the lock: the hand-off's grant,
// or letting local waiters try.
func (a *lockActor) releasedTo(ctx actor.Context, next *request, d *opDone) {
	switch {
	case d.next.Acquired && next.answered:
		a.undo(next.owner, next.write(), d.next.HoldCount)
		a.headReady = true
	case d.next.Acquired && a.env.unsynced(d.acked):
		a.unconfirmed(ctx, next, d.next, d.acked)
	case d.next.Acquired:
		a.env.Observe.handoff(a.key, d.op.owner, next.owner, true)
		a.handoffs++
		a.granted(ctx, next, d.next, d.sentAt)
	case a.fam == famFair:
		// The script told the head of the Redis queue; if that is one of
		// ours, its channel message wakes it.
	default:
		a.handoffs = 0
		a.afterPublicRelease(d.unlock.Heard)
	}
}

// unconfirmed handles a grant that too few replicas confirmed: a failover
// now could lose it, so it is undone, and tried again after a pause (with
// back-off) up to ReplicaSync.Attempts times before r fails.
func (a *lockActor) unconfirmed(ctx actor.Context, r *request, g scripts.Grant, acked int64) {
	a.undo(r.owner, r.write(), g.HoldCount)
	r.unsynced++
	if r.unsynced >= max(a.env.ReplicaSync.Attempts, 1) {
		a.answer(ctx, r, AcquireResult{Err: fmt.Errorf("%w: %w: %d of %d replicas confirmed it within %v",
			ErrNotAcquired, ErrReplicaSync, max(acked, 0), a.env.ReplicaSync.Replicas, a.env.ReplicaSync.Timeout)})
		return
	}
	pause := time.Duration(10<<r.unsynced) * time.Millisecond
	if r.elem != nil {
		a.headReady = false
		a.retry.set(a.timers, a.self, pause)
		return
	}
	a.runLater(pause, &op{kind: opAttempt, req: r})
}

// stillHeld accounts for a release after which Redis still counts holds (of
// the owner, or for the read-write lock of anyone), and returns the owner's
// remaining count. Holds without a grant here belong to someone else acting
// as the same owner (say the Redisson thread whose id a handle borrowed):
// this runtime no longer holds the lock, so it neither renews it nor keeps
// its waiters from contending.
func (a *lockActor) stillHeld(ctx actor.Context, h *hold, o *op) int64 {
	if h == nil {
		return 0
	}
	switch {
	case a.fam != famRW:
		h.count = max(h.count-o.holds, 1)
	case o.write:
		h.writes = max(h.writes-o.holds, 0)
		a.headReady = true // local readers may share what the write left
	default:
		h.count = max(h.count-o.holds, 0)
	}
	a.syncRenewal(h)
	if len(h.grants) == 0 {
		a.dropHold(ctx, h)
		a.headReady = true
		return 0
	}
	return h.counted(o.write)
}

// releasedLost: the owner held nothing when its unlock ran (it expired or was
// taken first), so the release fails and the hold is lost.
func (a *lockActor) releasedLost(ctx actor.Context, o *op, h *hold) {
	const reason = "the lock expired or was taken before it was unlocked"
	if h != nil {
		a.lost(ctx, h, LossGone, reason)
	}
	a.endGrant(o.grant, lossOf(LossGone, reason))
	o.reply(ReleaseResult{Err: errors.Join(lostError(reason), ErrNotOwner)})
}

// afterPublicRelease lets the head try for a lock this runtime just released
// publicly, unless clients elsewhere heard the unlock message (it reached
// more subscribers than our own connection): then they are waiting, and our
// head, which learns of the release a round trip before them and is awake
// already, would win nearly every time (measured: a process kept the lock
// for hundreds of consecutive acquisitions). It stands aside for yieldWindow
// so that one of them gets it, then queues behind it as usual.
func (a *lockActor) afterPublicRelease(heard int64) {
	a.headReady = true
	if a.live {
		heard--
	}
	if heard > 0 && a.queue.Len() > 0 {
		a.yieldUntil = time.Now().Add(yieldWindow)
		a.armRetry(yieldWindow)
	}
}

// yieldWindow: long enough for a process woken by the unlock message to
// send its attempt, short enough to cost little if none does.
const yieldWindow = 2 * time.Millisecond

// releaseFailed: Redis did not answer, so the hold may still be there. The
// grant goes back into the hold, so Done() keeps its meaning and a retried
// Unlock (same request id, de-duplicated by the latch) can finish the job.
func (a *lockActor) releaseFailed(o *op, h *hold, err error) {
	if o.grant != nil && h != nil {
		h.grants = append(h.grants, o.grant)
		if o.grant.watchdog {
			h.watchdogs++
		}
		a.syncRenewal(h)
	}
	o.reply(ReleaseResult{Err: fmt.Errorf("actorlock: unlock %q: %w", a.key.Name, err)})
}

func (a *lockActor) undone(d *opDone) {
	o := d.op
	if d.err != nil && a.retryLater(o) {
		return
	}
	if o.giveBack {
		a.gaveBack(o.owner)
	}
	if d.err == nil && d.unlock.State == scripts.Released {
		a.headReady = true
	}
}

func (a *lockActor) left(d *opDone) {
	if d.err != nil {
		a.retryLater(d.op)
	}
}

// retryLater re-runs an undo or leave that Redis did not answer, until the
// hold or queue place would have expired anyway: nobody renews it, so its
// lease (or the fair wait) bounds what an unreachable Redis costs. Closing
// does not wait that long. It reports whether o will run again.
func (a *lockActor) retryLater(o *op) bool {
	if time.Now().Before(o.giveUpAt) && !a.draining {
		a.runLater(100*time.Millisecond, o)
		return true
	}
	return false
}

// runLater runs o first after pause. The actor is not idle meanwhile.
func (a *lockActor) runLater(pause time.Duration, o *op) {
	a.due++
	a.timers.SendOnce(pause, a.self, &opDue{op: o})
}

func (a *lockActor) forced(ctx actor.Context, d *opDone) {
	if d.err == nil && d.done {
		for _, h := range a.holds {
			if a.fam != famRW || (h.writes > 0) == d.op.write {
				a.lost(ctx, h, LossGone, "the lock was force-unlocked")
			}
		}
		a.headReady = true
	}
	err := d.err
	if err != nil {
		err = fmt.Errorf("actorlock: force unlock %q: %w", a.key.Name, err)
	}
	d.op.onForce <- ForceUnlockResult{WasLocked: d.done, Err: err}
}

// undo gives back a hold of owner taken by an attempt whose caller is gone
// or whose outcome is unknown, but only while the owner's count is ifCount,
// so a newer hold is never touched. It runs before anything else.
func (a *lockActor) undo(owner string, write bool, ifCount int64) {
	a.ops = append([]*op{{
		kind: opUndo, owner: owner, write: write, ifCount: ifCount,
		requestID: a.env.NewRequestID(),
		giveUpAt:  time.Now().Add(a.env.Watchdog + a.env.CallTimeout),
	}}, a.ops...)
}

// leaveIfQueued takes an abandoned fair waiter out of the Redis queue (if it
// may have joined it), so that nobody waits behind a place nobody will take.
// Not while another request of the same owner still waits: the owner has
// one place.
func (a *lockActor) leaveIfQueued(r *request, mayHaveJoined bool) {
	if a.fam != famFair || r.left || !(r.enqueued || mayHaveJoined) {
		return
	}
	for _, p := range a.pending {
		if p.owner == r.owner {
			return
		}
	}
	r.left = true
	a.ops = append([]*op{{
		kind: opLeave, owner: r.owner,
		giveUpAt: time.Now().Add(a.env.FairWait + a.env.CallTimeout),
	}}, a.ops...)
}

// ---- holds -----------------------------------------------------------------

func (h *hold) extend(until time.Time) {
	if until.After(h.validUntil) {
		h.validUntil = until
	}
}

// localTTL is how long a local holder's hold stays valid, for a TryAcquire
// refused without asking Redis.
func (a *lockActor) localTTL() time.Duration {
	ttl := time.Duration(-1)
	for _, h := range a.holds {
		ttl = max(ttl, time.Until(h.validUntil), 0)
	}
	return ttl
}

// syncRenewal keeps the watchdog registration of h in line with its grants
// (and, for a read-write lock, with its read count, whose keys it renews).
func (a *lockActor) syncRenewal(h *hold) {
	switch {
	case h.watchdogs > 0 && (h.gen == 0 || h.renewReads != h.count):
		if h.gen == 0 {
			a.gens++
			h.gen = a.gens
		}
		h.renewReads = h.count
		a.env.System.Root.Send(a.env.renewal, &RenewRegister{
			Name: a.key.Name, Owner: h.owner, Gen: h.gen, Lock: a.self, RW: a.fam == famRW, Reads: h.count,
		})
	case h.watchdogs == 0 && h.gen != 0:
		a.env.System.Root.Send(a.env.renewal, &RenewCancel{Name: a.key.Name, Owner: h.owner, Gen: h.gen})
		h.gen = 0
	}
}

// dropHold forgets h: its owner no longer holds the lock.
func (a *lockActor) dropHold(ctx actor.Context, h *hold) {
	h.watchdogs = 0
	a.syncRenewal(h)
	delete(a.holds, h.owner)
	if h.from != nil {
		a.unwatch(ctx, h.from)
	}
}

// lost ends every grant of h with ErrLost and tells an owner actor.
func (a *lockActor) lost(ctx actor.Context, h *hold, why LossReason, reason string) {
	err := lossOf(why, reason)
	var token int64
	for _, g := range h.grants {
		a.endGrant(g, err)
		token = max(token, g.token)
	}
	// Acquisitions whose Unlock is under way are not in h.grants any more,
	// but they were held until now: their Done must close too, not when
	// their release gets through (it may be stuck behind a cut network).
	releasing := func(o *op) bool { return o != nil && o.kind == opRelease && o.owner == h.owner }
	if releasing(a.inflight) {
		a.endGrant(a.inflight.grant, err)
	}
	for _, o := range a.ops {
		if releasing(o) {
			a.endGrant(o.grant, err)
		}
	}
	a.tellLost(ctx, h, reason, token)
	a.dropHold(ctx, h)
	a.headReady = true
}

// tellLost pushes a LockLost to the owner actor of h, if it has one that
// can be reached: sending to a node whose connection broke would only make
// protoactor dial it again and again.
func (a *lockActor) tellLost(ctx actor.Context, h *hold, reason string, token int64) {
	if h.from == nil || h.unreachable {
		return
	}
	kind := a.key.Kind
	if h.writes > 0 {
		kind = messages.Kind_KIND_WRITE
	}
	// The owner asked by the name it knows, without the key prefix.
	ctx.Send(h.from, &messages.LockLost{Name: strings.TrimPrefix(a.key.Name, a.env.KeyPrefix), Kind: kind, Owner: h.owner, Reason: reason, FencingToken: token})
}

func (a *lockActor) endGrant(g *grant, cause error) {
	if g != nil && g.end != nil {
		g.end(cause)
	}
}

// expireHolds reports as lost every hold whose validity ran out: the watchdog
// could not renew it in time (or it had a fixed lease that is over).
func (a *lockActor) expireHolds(ctx actor.Context) {
	now := time.Now()
	for _, h := range a.holds {
		if !now.Before(h.validUntil) {
			why, reason := LossLocalDeadline, "the lease expired"
			if h.watchdogs > 0 {
				why, reason = LossRenewalFailed, "the lease expired before the watchdog could renew it"
			}
			a.lost(ctx, h, why, reason)
			a.giveBackHold(h)
		}
	}
	a.armValidity()
}

// armValidity keeps one timer at the earliest validity deadline of all
// holds, moved with every renewal; if it fires early (the earliest hold
// went meanwhile), expireHolds re-arms it.
func (a *lockActor) armValidity() {
	var earliest time.Time
	for _, h := range a.holds {
		if earliest.IsZero() || h.validUntil.Before(earliest) {
			earliest = h.validUntil
		}
	}
	if !earliest.IsZero() {
		a.validity.moveTo(a.env.System.Root, a.self, earliest)
	}
}

func (a *lockActor) armRetry(holderTTL time.Duration) {
	if holderTTL < 0 {
		// No expiry to wait for: re-check now and then in case a message
		// is missed.
		holderTTL = a.env.Watchdog
	}
	a.retry.set(a.timers, a.self, holderTTL)
}

// ---- replies ---------------------------------------------------------------

// answer replies to a pending request once and forgets it. An abandoned fair
// waiter that is not in flight gives up its place now; one in flight does
// when its attempt's outcome comes back.
func (a *lockActor) answer(ctx actor.Context, r *request, res AcquireResult) {
	a.forget(r)
	a.deliver(r, res)
	if r.from != nil {
		a.unwatch(ctx, r.from)
	}
	if res.Err != nil && !r.inflight {
		a.leaveIfQueued(r, false)
	}
}

// forget drops a request from the books without replying.
func (a *lockActor) forget(r *request) {
	r.answered = true
	delete(a.pending, r.key)
	if r.stopTimer != nil {
		r.stopTimer()
	}
	if r.elem != nil {
		if a.queue.Front() == r.elem {
			a.headReady = true // the next waiter may try
		}
		a.queue.Remove(r.elem)
		r.elem = nil
	}
}

func (a *lockActor) deliver(r *request, res AcquireResult) {
	if r.reply != nil {
		r.reply <- res
		return
	}
	if r.from == nil || r.unreachable {
		return // its caller is gone
	}
	resp := &messages.AcquireResponse{RequestId: r.protoID, Error: protoError(res.Err), HoldCount: res.HoldCount}
	if res.Err == nil {
		resp.Acquired, resp.FencingToken = true, res.Token
		resp.OwnerToken, resp.Owner = r.token.String(), r.owner
	}
	resp.TtlMs = res.HolderTTL.Milliseconds()
	if res.HolderTTL < 0 {
		resp.TtlMs = -1
	}
	a.env.System.Root.Send(r.from, resp)
}

// ---- owner actors ----------------------------------------------------------

func (a *lockActor) watch(ctx actor.Context, pid *actor.PID) {
	k := pidKey(pid)
	w := a.watched[k]
	switch {
	case w == nil:
		if a.watched == nil {
			a.watched = map[string]*watchRef{}
		}
		w = &watchRef{pid: pid}
		a.watched[k] = w
		ctx.Watch(pid)
	case w.ended:
		w.ended = false
		ctx.Watch(pid)
	}
	w.refs++
}

func (a *lockActor) unwatch(ctx actor.Context, pid *actor.PID) {
	k := pidKey(pid)
	if w := a.watched[k]; w != nil {
		if w.refs--; w.refs <= 0 {
			delete(a.watched, k)
			if !w.ended {
				ctx.Unwatch(pid)
			}
		}
	}
}

// ownerStopped handles a Terminated for an owner actor or requester. Any
// remote peer can send one naming any PID, so it is believed only for an
// actor of this process that the process registry confirms gone: then
// everything it held or waited for is released at once. For a remote actor
// see remoteStopped.
func (a *lockActor) ownerStopped(ctx actor.Context, m *actor.Terminated) {
	who := m.Who
	k := pidKey(who)
	if _, ok := a.watched[k]; !ok {
		return
	}
	if !a.isLocal(who) {
		a.remoteStopped(who, m.Why == actor.TerminatedReason_AddressTerminated)
		return
	}
	if _, alive := a.env.System.ProcessRegistry.GetLocal(who.Id); alive {
		return // forged
	}
	delete(a.watched, k)
	for _, r := range a.pending {
		if r.from != nil && pidKey(r.from) == k {
			r.reply, r.from = nil, nil // nobody to tell
			a.forget(r)
			if !r.inflight {
				a.leaveIfQueued(r, false)
			}
		}
	}
	for _, h := range a.holds {
		if h.from != nil && pidKey(h.from) == k {
			a.releaseAll(h, lostError("the owner actor stopped"))
		}
	}
}

// ---- remote owners -----------------------------------------------------------
//
// An owner actor in another process is watched like a local one, but a
// watch alone cannot tell a frozen node or a cut network from a quiet one,
// and its Terminated can be forged by any peer. So the owner proves it is
// alive with RenewRequests (its token says who it is): a remote owner's
// watchdog holds are released when none came for a whole watchdog lease,
// whatever else happens, and the watchdog renews them in Redis only until
// then. Requesters still waiting need no RenewRequest (they may not have
// their token yet), except after a Terminated.
//
// Sending to a remote PID (a reply, a LockLost, a Watch) hands the message
// to protoactor's endpoint actors without network I/O here; only the first
// message to a new address waits for protoactor's endpoint supervisor to
// spawn them (the connection is then made by the endpoint's own actor).
// Nothing more is sent to a node whose connection broke (unreachable):
// each send would make protoactor dial it again.

// isLocal reports whether pid is an actor of this process. A peer may
// claim a local PID as its sender; it then gets a local owner's rules: its
// hold lasts while that local actor lives (at once released if there is
// none), which gains it nothing over renewing its own hold.
func (a *lockActor) isLocal(pid *actor.PID) bool {
	return pid.GetAddress() == a.env.System.Address() || pid.GetAddress() == localAddress
}

// localAddress is protoactor's address of a system without remote.
const localAddress = "nonhost"

// remoteStopped handles a Terminated for a remote actor: it stopped, or
// the connection to its node broke (unreachable). Forged or not, it only
// brings the liveness deadline of that actor's holds and requests forward
// to half a lease from now: an owner whose RenewRequests keep coming (one
// is due every lease/3) keeps its locks, and one that really stopped loses
// them in half a lease instead of a whole one.
func (a *lockActor) remoteStopped(who *actor.PID, unreachable bool) {
	k := pidKey(who)
	a.watched[k].ended = true
	until := time.Now().Add(a.env.Watchdog / 2)
	for _, r := range a.pending {
		if r.from != nil && pidKey(r.from) == k {
			if r.suspectUntil.IsZero() || until.Before(r.suspectUntil) {
				r.suspectUntil = until
			}
			r.unreachable = r.unreachable || unreachable
		}
	}
	for _, h := range a.holds {
		if h.from != nil && pidKey(h.from) == k {
			h.suspect = true
			if h.aliveUntil.IsZero() || until.Before(h.aliveUntil) {
				h.aliveUntil = until
			}
			h.unreachable = h.unreachable || unreachable
		}
	}
	a.armAlive()
}

// renewMessage takes a RenewRequest as the proof that the owner of its
// token is alive: its holds are kept (and renewed by the watchdog) for
// another lease, and its waiting requests are no longer suspect.
func (a *lockActor) renewMessage(ctx actor.Context, m *messages.RenewRequest) {
	respond := func(err error) {
		resp := &messages.RenewResponse{RequestId: m.RequestId, Error: protoError(err)}
		if err == nil {
			resp.Renewed, resp.LeaseMs = true, a.env.Watchdog.Milliseconds()
		}
		ctx.Respond(resp)
	}
	owner, err := OwnerOfToken(a.env.RuntimeID, m.OwnerToken)
	switch {
	case err != nil:
		respond(err)
		return
	case !a.knows(owner):
		respond(fmt.Errorf("%w: that owner_token holds or awaits nothing of lock %q here", ErrNotOwner, a.key.Name))
		return
	}
	if h := a.holds[owner]; h != nil && h.remote {
		h.aliveUntil = time.Now().Add(a.env.Watchdog)
		h.suspect, h.unreachable = false, false
	}
	for _, r := range a.pending {
		if r.msg && r.owner == owner {
			r.suspectUntil, r.unreachable = time.Time{}, false
		}
	}
	respond(nil)
}

// liveness reports whether h is released when aliveUntil passes.
func (h *hold) liveness() bool {
	return h.remote && (h.watchdogs > 0 || h.suspect) && !h.aliveUntil.IsZero()
}

// armAlive keeps one timer at the earliest liveness deadline, moved with
// every RenewRequest; if it fires early, expireOwners re-arms it.
func (a *lockActor) armAlive() {
	var earliest time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
	}
	for _, h := range a.holds {
		if h.liveness() {
			consider(h.aliveUntil)
		}
	}
	for _, r := range a.pending {
		consider(r.suspectUntil)
	}
	if !earliest.IsZero() {
		a.alive.moveTo(a.env.System.Root, a.self, earliest)
	}
}

// expireOwners gives up on the remote owners that did not prove alive in
// time: their waiting requests are forgotten, their holds released (and
// their owner actors told, if reachable).
func (a *lockActor) expireOwners(ctx actor.Context) {
	now := time.Now()
	for _, r := range a.pending {
		if !r.suspectUntil.IsZero() && !now.Before(r.suspectUntil) {
			a.unwatch(ctx, r.from)
			r.reply, r.from = nil, nil // nobody to tell
			a.forget(r)
			if !r.inflight {
				a.leaveIfQueued(r, false)
			}
		}
	}
	for _, h := range a.holds {
		if h.liveness() && !now.Before(h.aliveUntil) {
			reason := fmt.Sprintf("no RenewRequest from the remote owner for %v", a.env.Watchdog)
			if h.suspect {
				reason = "the remote owner actor stopped or its connection broke, and no RenewRequest came since"
			}
			a.abandon(ctx, h, reason)
		}
	}
	a.armAlive()
}

// abandon releases every hold of a remote owner that stopped proving it
// is alive, and tells it so if it can be reached.
func (a *lockActor) abandon(ctx actor.Context, h *hold, reason string) {
	var token int64
	for _, g := range h.grants {
		token = max(token, g.token)
	}
	a.tellLost(ctx, h, reason, token)
	if h.from != nil {
		a.unwatch(ctx, h.from)
	}
	h.aliveUntil, h.suspect = time.Time{}, false
	a.releaseAll(h, lostError(reason))
}

// releaseAll ends every grant of h and queues the release of all its holds.
func (a *lockActor) releaseAll(h *hold, cause error) {
	for _, g := range h.grants {
		a.endGrant(g, cause)
	}
	for _, write := range []bool{false, true} {
		if n := h.counted(write); n > 0 || (a.fam != famRW && !write) {
			a.ops = append(a.ops, &op{
				kind: opRelease, owner: h.owner, write: write, holds: max(n, 1), requestID: a.env.NewRequestID(),
			})
		}
	}
	h.grants, h.watchdogs, h.from = nil, 0, nil
	a.syncRenewal(h)
}

// ---- subscription, idleness, shutdown --------------------------------------

// syncSubscription keeps this actor subscribed, while local requests wait
// for a lock another owner holds, to where its wake-ups come from. An
// uncontended acquisition never subscribes; a contended name stays
// subscribed until its queue empties, so a busy lock does not subscribe once
// per hand-over. The fair lock follows its earliest local waiter (see
// fairTopic).
func (a *lockActor) syncSubscription(ctx actor.Context) {
	if a.queue.Len() == 0 {
		a.contended = false
	}
	want := a.wantTopic()
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

func (a *lockActor) wantTopic() Topic {
	switch {
	case a.fam == famFair:
		return a.fairTopic()
	case !a.contended:
		return ""
	case a.fam == famRW:
		return Topic(scripts.RWChannel(a.key.Name))
	}
	return Topic(scripts.LockChannel(a.key.Name))
}

func (a *lockActor) idle() bool {
	return len(a.holds) == 0 && len(a.pending) == 0 && a.inflight == nil && len(a.ops) == 0 && a.subscribed == "" &&
		a.due == 0 && len(a.givingBack) == 0
}

// syncIdle arms the receive timeout exactly while idle; when it fires the
// manager is asked to stop this actor (see manager.idle).
func (a *lockActor) syncIdle(ctx actor.Context) {
	idle := a.idle() && !a.idleReported && !a.draining
	switch {
	case idle && !a.idleArmed:
		a.idleArmed = true
		ctx.SetReceiveTimeout(a.env.IdleAfter)
	case !idle && a.idleArmed:
		a.idleArmed = false
		ctx.CancelReceiveTimeout()
	}
}

// drain is Close: fail every request, release every hold, then report.
func (a *lockActor) drain(ctx actor.Context) {
	a.draining = true
	for _, r := range a.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for _, h := range a.holds {
		a.releaseAll(h, ErrClosed)
		delete(a.holds, h.owner)
	}
	parent := ctx.Parent()
	a.drained = func() { a.env.System.Root.Send(parent, &lockDrained{key: a.key}) }
}

// stop runs when the actor stops: idle (nothing left), at Close after
// drain, or after a failure. In the last case whatever is still held is
// released best effort, without waiting.
func (a *lockActor) stop(ctx actor.Context) {
	a.retry.cancel()
	a.validity.cancel()
	a.alive.cancel()
	for _, r := range a.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for _, h := range a.holds {
		a.releaseAll(h, lostError("the lock actor stopped"))
	}
	for _, o := range a.ops {
		if o.kind == opRelease && o.grant == nil {
			release := a.releaseCall(o)
			a.env.goCall(nil, func(ctx context.Context) any {
				_, _, _, _ = release(ctx, false)
				return nil
			})
		}
	}
	a.ops, a.parked = nil, nil
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
