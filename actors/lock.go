package actors

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// lockActor owns one reentrant lock name in this runtime. It is a sequential
// state machine with at most one Redis script in flight:
//
//   - local requests wait in a FIFO; only its head contends in Redis, and only
//     when something suggests the lock may be free (first arrival, an unlock
//     message, the holder's TTL running out, a (re)subscription);
//   - re-entries of an owner that holds the lock pass the queue at once;
//   - when a local holder releases its last hold while a local waiter is
//     queued, one script releases and grants the next owner (a hand-off), at
//     most MaxHandoffs times in a row before a public release lets other
//     processes compete;
//   - every hold has a local validity deadline (when the last successful
//     acquire or renewal was sent, plus the lease, minus drift) after which
//     it is reported lost, so Done() fires before Redis lets anyone else in.
type lockActor struct {
	env     *Env
	key     LockKey
	channel Topic
	self    *actor.PID
	timers  *scheduler.TimerScheduler

	routed       uint64 // requests received from the manager (idle handshake)
	idleArmed    bool
	idleReported bool

	holds    map[string]*hold     // by owner; only owners holding now
	queue    *list.List           // waiting *request, FIFO
	pending  map[reqKey]*request  // unanswered requests
	ops      []*op                // waiting to run, before the queue's head
	inflight *op                  // the script in flight
	watched  map[string]*watchRef // owner actors and requesters, by PID
	handoffs int                  // consecutive local hand-offs
	gens     uint64               // renewal registrations made

	headReady  bool // the lock may be free: the head should try
	contended  bool // a waiter met another owner: wake-ups come by pub/sub
	subscribed bool
	live       bool      // the subscription is confirmed
	yieldUntil time.Time // the head stands aside until then (see afterPublicRelease)
	retrySeq   uint64
	retryStop  scheduler.CancelFunc
	validSeq   uint64
	validStop  scheduler.CancelFunc
	validAt    time.Time // when the validity timer fires; zero: not armed

	draining bool
	drained  func()
}

type reqKey struct {
	from string // PID of an actor caller; "" for Go callers
	id   string
}

type request struct {
	key      reqKey
	owner    string
	lease    time.Duration // 0: watchdog
	deadline time.Time     // zero: none
	tryOnce  bool

	goID  uint64 // Go caller
	end   context.CancelCauseFunc
	reply chan<- AcquireResult

	from    *actor.PID // actor caller
	protoID string

	elem      *list.Element // in the queue
	stopTimer scheduler.CancelFunc
	answered  bool // a success arriving now must be given back
}

func (r *request) leaseOr(watchdog time.Duration) time.Duration {
	if r.lease > 0 {
		return r.lease
	}
	return watchdog
}

type grant struct {
	goID     uint64 // the Acquire's ID, Go callers only
	token    int64
	watchdog bool
	end      context.CancelCauseFunc // Go callers: ends the Held's context
}

type hold struct {
	owner      string
	count      int64    // the owner's hold count in Redis, as last seen
	grants     []*grant // acquisitions not yet released, oldest first
	watchdogs  int      // grants renewed by the watchdog
	gen        uint64   // renewal registration; 0: none
	validUntil time.Time
	from       *actor.PID // the owning actor of a hold acquired by message
}

type opKind int

const (
	opAttempt opKind = iota
	opRelease
	opHandoff
	opUndo
	opForce
)

type op struct {
	kind      opKind
	req       *request // attempt; handoff: the next owner
	owner     string   // release, handoff (releasing owner), undo
	grant     *grant   // release, handoff: the acquisition released; nil: holds of a departed owner
	holds     int64    // release: how many holds
	ifCount   int64    // undo: release only if the count is this
	requestID string   // release, handoff, undo: unlock latch id
	seen      int64    // attempt: the owner's count when it started
	fromQueue bool     // attempt, handoff: req was a queued waiter
	giveUpAt  time.Time
	onRelease func(ReleaseResult)
	onForce   chan<- ForceUnlockResult
}

func (o *op) reply(res ReleaseResult) {
	if o.onRelease != nil {
		o.onRelease(res)
	}
}

type opDone struct {
	op      *op
	sentAt  time.Time
	grant   scripts.Grant
	unlock  scripts.Unlock
	handoff scripts.Handoff
	forced  bool
	err     error
}

type watchRef struct {
	pid  *actor.PID
	refs int
}

// timer messages; seq/request identity makes late firings harmless
type (
	waiterDeadline struct{ req *request }
	retryDue       struct{ seq uint64 }
	validityDue    struct{ seq uint64 }
	undoDue        struct{ op *op }
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

func newLockActor(env *Env, key LockKey) *lockActor {
	return &lockActor{
		env:     env,
		key:     key,
		channel: Topic{Name: scripts.LockChannel(key.Name)},
		timers:  scheduler.NewTimerScheduler(env.System.Root),
		holds:   map[string]*hold{},
		queue:   list.New(),
		pending: map[reqKey]*request{},
		watched: map[string]*watchRef{},
	}
}

func (a *lockActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	switch msg.(type) {
	case routed, *messages.AcquireRequest, *messages.ReleaseRequest, *messages.CancelRequest:
		a.routed++
		a.idleReported = false
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
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
			key: reqKey{id: strconv.FormatUint(m.ID, 10)}, owner: m.Owner, lease: m.Lease,
			deadline: m.Deadline, tryOnce: m.TryOnce, goID: m.ID, end: m.End, reply: m.Reply,
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
		a.cancel(ctx, reqKey{from: pidKey(ctx.Sender()), id: m.RequestId})
	case *ForceUnlock:
		a.ops = append(a.ops, &op{kind: opForce, onForce: m.Reply})
	case *opDone:
		a.done(ctx, m)
	case *waiterDeadline:
		a.deadlinePassed(ctx, m.req)
	case *retryDue:
		if m.seq == a.retrySeq {
			a.headReady = true
		}
	case *validityDue:
		if m.seq == a.validSeq {
			a.validAt = time.Time{}
			a.expireHolds(ctx)
		}
	case *undoDue:
		if !a.draining {
			a.ops = append([]*op{m.op}, a.ops...)
		}
	case *Subscribed:
		a.live = a.subscribed
		a.headReady = true
	case *Published:
		a.headReady = true
	case *Renewed:
		if h := a.holds[m.Owner]; h != nil && h.gen == m.Gen {
			h.extend(m.SentAt.Add(a.env.Watchdog - drift(a.env.Watchdog)))
			a.armValidity()
		}
	case *RenewGone:
		if h := a.holds[m.Owner]; h != nil && h.gen == m.Gen {
			a.lost(ctx, h, "the lock is gone from Redis (deleted, expired or taken by another owner)")
		}
	case *actor.Terminated:
		a.ownerStopped(ctx, m.Who)
	case *drainLock:
		a.drain(ctx)
	}
	a.kick(ctx)
}

// ---- admission -------------------------------------------------------------

func (a *lockActor) admitMessage(ctx actor.Context, m *messages.AcquireRequest) {
	from := ctx.Sender()
	r := &request{
		key:     reqKey{from: pidKey(from), id: m.RequestId},
		owner:   m.Owner,
		lease:   time.Duration(m.LeaseMs) * time.Millisecond,
		tryOnce: m.WaitMs == 0 && !m.WaitIndefinitely,
		from:    from,
		protoID: m.RequestId,
	}
	if r.owner == "" {
		r.owner = actorOwner(a.env.RuntimeID, from)
	}
	if m.WaitMs > 0 {
		r.deadline = time.Now().Add(time.Duration(m.WaitMs) * time.Millisecond)
	}
	a.admit(ctx, r)
}

// actorOwner is the owner id of locks acquired by message from pid.
func actorOwner(runtimeID string, pid *actor.PID) string {
	return runtimeID + ":" + pidKey(pid)
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
	if h != nil && !samePID(h.from, r.from) {
		// A named owner never lets another actor (or a Go handle) into a hold
		// an actor acquired by message, nor the reverse.
		a.deliver(r, AcquireResult{Err: fmt.Errorf("%w: owner %q is held by another caller", ErrNotOwner, r.owner)})
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
	case h != nil:
		// Re-entry: the owner already holds the lock, so it must not wait
		// behind others (they wait for it).
		a.ops = append(a.ops, &op{kind: opAttempt, req: r})
	case r.tryOnce && a.heldLocally():
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
	case r.tryOnce:
		a.ops = append(a.ops, &op{kind: opAttempt, req: r})
	default:
		if a.queue.Len() == 0 {
			a.headReady = true
		}
		r.elem = a.queue.PushBack(r)
	}
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
	if h != nil && h.from == nil {
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
	a.queueRelease(h, g, m.RequestID, reply)
}

func (a *lockActor) releaseMessage(ctx actor.Context, m *messages.ReleaseRequest) {
	from := ctx.Sender()
	respond := func(res ReleaseResult) {
		ctx.Send(from, &messages.ReleaseResponse{
			RequestId: m.RequestId, Released: res.Released, HoldCount: res.HoldCount, Error: protoError(res.Err),
		})
	}
	if m.RequestId == "" {
		respond(ReleaseResult{Err: requestIDError("", nil)})
		return
	}
	owner := m.Owner
	if owner == "" {
		owner = actorOwner(a.env.RuntimeID, from)
	}
	h := a.holds[owner]
	if h == nil || len(h.grants) == 0 || !samePID(h.from, from) {
		respond(ReleaseResult{Err: fmt.Errorf("%w: %s holds nothing of lock %q as owner %q", ErrNotOwner, pidKey(from), a.key.Name, owner)})
		return
	}
	g := h.grants[len(h.grants)-1]
	h.grants = h.grants[:len(h.grants)-1]
	a.queueRelease(h, g, a.env.RuntimeID+":"+pidKey(from)+":"+m.RequestId, respond)
}

// queueRelease takes grant g out of hold h (the watchdog stops renewing it
// now, so no renewal outlives the unlock) and queues its release in Redis.
func (a *lockActor) queueRelease(h *hold, g *grant, requestID string, reply func(ReleaseResult)) {
	if g.watchdog {
		h.watchdogs--
	}
	a.syncRenewal(h)
	a.ops = append(a.ops, &op{kind: opRelease, owner: h.owner, grant: g, holds: 1, requestID: requestID, onRelease: reply})
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
	if !r.answered {
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: -1})
	}
}

// ---- the scheduler ---------------------------------------------------------

// kick starts the next script if none is in flight: queued operations first
// (releases, re-entries, single attempts, undos), then the queue's head when
// the lock may be free and no local owner holds it.
func (a *lockActor) kick(ctx actor.Context) {
	for a.inflight == nil {
		if len(a.ops) > 0 {
			o := a.ops[0]
			a.ops = a.ops[1:]
			a.start(ctx, o)
			continue
		}
		if !a.headReady || a.heldLocally() || a.queue.Len() == 0 || time.Now().Before(a.yieldUntil) {
			break
		}
		head := a.queue.Remove(a.queue.Front()).(*request)
		head.elem = nil
		a.stopRetry()
		a.start(ctx, &op{kind: opAttempt, req: head, fromQueue: true})
	}
	a.syncSubscription(ctx)
	if a.draining && a.inflight == nil && len(a.ops) == 0 && a.drained != nil {
		a.drained()
		a.drained = nil
	}
	a.syncIdle(ctx)
}

func (a *lockActor) start(ctx actor.Context, o *op) {
	switch o.kind {
	case opAttempt:
		if o.req.answered {
			return
		}
		h := a.holds[o.req.owner]
		if h == nil && o.req.tryOnce && a.heldLocally() {
			a.answer(ctx, o.req, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
			return
		}
		if h != nil {
			o.seen = h.count
		}
		a.inflight = o
		args := scripts.AcquireArgs{
			Name: a.key.Name, Owner: o.req.owner, Lease: o.req.leaseOr(a.env.Watchdog),
			Seen: -1, TokenTTL: a.env.TokenTTL,
		}
		a.call(o, func(ctx context.Context, d *opDone, attempt int) (err error) {
			if attempt > 0 {
				args.Seen = o.seen
			}
			d.grant, err = scripts.AcquireLock(ctx, a.env.Redis, args)
			return err
		})
	case opRelease:
		h := a.holds[o.owner]
		if h == nil && o.grant != nil {
			o.reply(ReleaseResult{Err: lostError("the hold ended before this unlock")})
			return
		}
		if next := a.handoffTarget(h, o); next != nil {
			a.startHandoff(o, next)
			return
		}
		a.inflight = o
		args := scripts.UnlockArgs{
			Name: a.key.Name, Owner: o.owner, RequestID: o.requestID, Holds: o.holds,
			IfCount: -1, LatchTTL: a.env.LatchTTL,
		}
		a.call(o, func(ctx context.Context, d *opDone, _ int) (err error) {
			d.unlock, err = scripts.UnlockLock(ctx, a.env.Redis, args)
			return err
		})
	case opUndo:
		a.inflight = o
		args := scripts.UnlockArgs{
			Name: a.key.Name, Owner: o.owner, RequestID: o.requestID, Holds: 1,
			IfCount: o.ifCount, LatchTTL: a.env.LatchTTL,
		}
		a.call(o, func(ctx context.Context, d *opDone, _ int) (err error) {
			d.unlock, err = scripts.UnlockLock(ctx, a.env.Redis, args)
			return err
		})
	case opForce:
		a.inflight = o
		a.call(o, func(ctx context.Context, d *opDone, _ int) (err error) {
			d.forced, err = scripts.ForceUnlockLock(ctx, a.env.Redis, a.key.Name)
			return err
		})
	}
}

// handoffTarget is the waiter a release of h's last hold hands the lock to,
// or nil for a plain release.
func (a *lockActor) handoffTarget(h *hold, o *op) *request {
	if o.grant == nil || h.count != 1 || a.handoffs >= a.env.MaxHandoffs || a.queue.Len() == 0 {
		return nil
	}
	next := a.queue.Remove(a.queue.Front()).(*request)
	next.elem = nil
	return next
}

func (a *lockActor) startHandoff(o *op, next *request) {
	o.kind, o.req, o.fromQueue = opHandoff, next, true
	a.inflight = o
	args := scripts.HandoffArgs{
		Name: a.key.Name, From: o.owner, RequestID: o.requestID, LatchTTL: a.env.LatchTTL,
		To: scripts.AcquireArgs{
			Owner: next.owner, Lease: next.leaseOr(a.env.Watchdog), Seen: -1, TokenTTL: a.env.TokenTTL,
		},
	}
	a.call(o, func(ctx context.Context, d *opDone, attempt int) (err error) {
		if attempt > 0 {
			args.To.Seen = 0
		}
		d.handoff, err = scripts.HandoffLock(ctx, a.env.Redis, args)
		return err
	})
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
	switch d.op.kind {
	case opAttempt:
		a.attempted(ctx, d)
	case opRelease:
		a.released(ctx, d)
	case opHandoff:
		a.handedOff(ctx, d)
	case opUndo:
		a.undone(d)
	case opForce:
		a.forced(ctx, d)
	}
}

func (a *lockActor) attempted(ctx actor.Context, d *opDone) {
	r := d.op.req
	if d.err != nil {
		// The attempt may have taken effect: undo exactly that, then report.
		if mayHaveRun(d.err) {
			a.undo(r.owner, d.op.seen+1)
		}
		if !r.answered {
			a.answer(ctx, r, AcquireResult{Err: fmt.Errorf("actorlock: acquire %q: %w", a.key.Name, d.err)})
		}
		return
	}
	g := d.grant
	if g.Acquired {
		if r.answered {
			a.undo(r.owner, g.HoldCount)
			return
		}
		if a.holds[r.owner] == nil {
			a.handoffs = 0
		}
		a.granted(ctx, r, g, d.sentAt)
		return
	}
	if h := a.holds[r.owner]; h != nil {
		// A re-entry found another owner in Redis: this hold is gone.
		a.lost(ctx, h, "the lock is held by another owner")
	}
	if r.answered {
		return
	}
	if r.tryOnce {
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: g.HolderTTL})
		return
	}
	// Back to the head of the queue until something suggests the lock may
	// be free: an unlock message, or the holder's lease running out (which
	// also bounds what a missed message costs).
	r.elem = a.queue.PushFront(r)
	a.headReady = false
	a.contended = true
	a.armRetry(g.HolderTTL)
}

func (a *lockActor) granted(ctx actor.Context, r *request, g scripts.Grant, sentAt time.Time) {
	h := a.holds[r.owner]
	if h == nil {
		h = &hold{owner: r.owner, from: r.from}
		a.holds[r.owner] = h
		if r.from != nil {
			a.watch(ctx, r.from)
		}
	}
	h.count = g.HoldCount
	lease := r.leaseOr(a.env.Watchdog)
	h.extend(sentAt.Add(lease - drift(lease)))
	gr := &grant{goID: r.goID, token: g.Token, watchdog: r.lease == 0, end: r.end}
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
		if q := e.Value.(*request); q.owner == r.owner {
			a.queue.Remove(e)
			q.elem = nil
			a.ops = append(a.ops, &op{kind: opAttempt, req: q})
		}
		e = next
	}
}

func (a *lockActor) released(ctx actor.Context, d *opDone) {
	o := d.op
	h := a.holds[o.owner]
	if d.err != nil {
		a.releaseFailed(o, h, d.err)
		return
	}
	switch d.unlock.State {
	case scripts.Released:
		if h != nil {
			a.dropHold(ctx, h)
		}
		a.handoffs = 0
		a.afterPublicRelease(d.unlock.Heard)
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{Released: true})
	case scripts.StillHeld:
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{HoldCount: a.stillHeld(ctx, h, o.holds)})
	default:
		a.releasedLost(ctx, o, h)
	}
}

// stillHeld accounts for a release after which Redis still counts holds of
// the owner, and returns that count. Holds without a grant here belong to
// someone else acting as the same owner (say the Redisson thread whose id a
// handle borrowed): this runtime no longer holds the lock, so it neither
// renews it nor keeps its waiters from contending.
func (a *lockActor) stillHeld(ctx actor.Context, h *hold, released int64) int64 {
	if h == nil {
		return 1
	}
	h.count = max(h.count-released, 1)
	if len(h.grants) == 0 {
		a.dropHold(ctx, h)
		a.headReady = true
	}
	return h.count
}

// releasedLost: the owner held nothing when its unlock ran (it expired or was
// taken first), so the release fails and the hold is lost.
func (a *lockActor) releasedLost(ctx actor.Context, o *op, h *hold) {
	const reason = "the lock expired or was taken before it was unlocked"
	if h != nil {
		a.lost(ctx, h, reason)
	}
	a.endGrant(o.grant, lostError(reason))
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

func (a *lockActor) handedOff(ctx actor.Context, d *opDone) {
	o, next := d.op, d.op.req
	h := a.holds[o.owner]
	if d.err != nil {
		a.releaseFailed(o, h, d.err)
		// The next owner may hold it now without knowing: undo, then retry.
		if mayHaveRun(d.err) {
			a.undo(next.owner, 1)
		}
		a.requeue(next, true)
		return
	}
	switch d.handoff.Released {
	case scripts.NotOwner:
		a.releasedLost(ctx, o, h)
		a.requeue(next, true)
	case scripts.StillHeld:
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{HoldCount: a.stillHeld(ctx, h, 1)})
		a.requeue(next, a.headReady)
	default:
		if h != nil {
			a.dropHold(ctx, h)
		}
		a.endGrant(o.grant, ErrUnlocked)
		o.reply(ReleaseResult{Released: true})
		g := d.handoff.Next
		switch {
		case !g.Acquired:
			a.requeue(next, false)
			a.armRetry(g.HolderTTL)
		case next.answered:
			a.undo(next.owner, g.HoldCount)
			a.headReady = true
		default:
			a.handoffs++
			a.granted(ctx, next, g, d.sentAt)
		}
	}
}

// requeue puts a waiter whose hand-off did not happen back at the head.
func (a *lockActor) requeue(r *request, ready bool) {
	if r.answered {
		return
	}
	r.elem = a.queue.PushFront(r)
	a.headReady = ready
}

func (a *lockActor) undone(d *opDone) {
	o := d.op
	if d.err != nil {
		// Keep trying until the hold would have expired anyway: nobody
		// renews it, so the lease bounds what an unreachable Redis costs.
		// Closing does not wait that long.
		if time.Now().Before(o.giveUpAt) && !a.draining {
			a.timers.SendOnce(100*time.Millisecond, a.self, &undoDue{op: o})
		}
		return
	}
	if d.unlock.State == scripts.Released {
		a.headReady = true
	}
}

func (a *lockActor) forced(ctx actor.Context, d *opDone) {
	if d.err == nil && d.forced {
		for _, h := range a.holds {
			a.lost(ctx, h, "the lock was force-unlocked")
		}
		a.headReady = true
	}
	err := d.err
	if err != nil {
		err = fmt.Errorf("actorlock: force unlock %q: %w", a.key.Name, err)
	}
	d.op.onForce <- ForceUnlockResult{WasLocked: d.forced, Err: err}
}

// undo gives back a hold of owner taken by an attempt whose caller is gone
// or whose outcome is unknown, but only while the owner's count is ifCount,
// so a newer hold is never touched. It runs before anything else.
func (a *lockActor) undo(owner string, ifCount int64) {
	o := &op{
		kind: opUndo, owner: owner, ifCount: ifCount,
		requestID: a.env.NewRequestID(),
		giveUpAt:  time.Now().Add(a.env.Watchdog + a.env.CallTimeout),
	}
	a.ops = append([]*op{o}, a.ops...)
}

// ---- holds -----------------------------------------------------------------

func (h *hold) extend(until time.Time) {
	if until.After(h.validUntil) {
		h.validUntil = until
	}
}

func (a *lockActor) heldLocally() bool { return len(a.holds) > 0 }

// localTTL is how long the local holder's hold stays valid, for a TryAcquire
// refused without asking Redis.
func (a *lockActor) localTTL() time.Duration {
	for _, h := range a.holds {
		return max(time.Until(h.validUntil), 0)
	}
	return -1
}

// syncRenewal keeps the watchdog registration of h in line with its grants.
func (a *lockActor) syncRenewal(h *hold) {
	switch {
	case h.watchdogs > 0 && h.gen == 0:
		a.gens++
		h.gen = a.gens
		a.env.System.Root.Send(a.env.renewal, &RenewRegister{Name: a.key.Name, Owner: h.owner, Gen: h.gen, Lock: a.self})
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
func (a *lockActor) lost(ctx actor.Context, h *hold, reason string) {
	err := lostError(reason)
	var token int64
	for _, g := range h.grants {
		a.endGrant(g, err)
		token = max(token, g.token)
	}
	if h.from != nil {
		ctx.Send(h.from, &messages.LockLost{Name: a.key.Name, Kind: a.key.Kind, Owner: h.owner, Reason: reason, FencingToken: token})
	}
	a.dropHold(ctx, h)
	a.headReady = true
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
			reason := "the lease expired"
			if h.watchdogs > 0 {
				reason = "the lease expired before the watchdog could renew it"
			}
			a.lost(ctx, h, reason)
		}
	}
	a.armValidity()
}

// armValidity keeps one timer at the earliest validity deadline of all holds.
func (a *lockActor) armValidity() {
	var earliest time.Time
	for _, h := range a.holds {
		if earliest.IsZero() || h.validUntil.Before(earliest) {
			earliest = h.validUntil
		}
	}
	if earliest.IsZero() || (!a.validAt.IsZero() && !earliest.Before(a.validAt)) {
		// Nothing held, or the armed timer fires first and re-arms then.
		return
	}
	a.stopValidity()
	a.validSeq++
	a.validAt = earliest
	a.validStop = a.timers.SendOnce(time.Until(earliest), a.self, &validityDue{seq: a.validSeq})
}

func (a *lockActor) stopValidity() {
	if a.validStop != nil {
		a.validStop()
		a.validStop = nil
	}
	a.validAt = time.Time{}
}

func (a *lockActor) armRetry(holderTTL time.Duration) {
	if holderTTL < 0 {
		// No expiry to wait for: re-check now and then in case a message
		// is missed.
		holderTTL = a.env.Watchdog
	}
	a.stopRetry()
	a.retrySeq++
	a.retryStop = a.timers.SendOnce(holderTTL, a.self, &retryDue{seq: a.retrySeq})
}

func (a *lockActor) stopRetry() {
	if a.retryStop != nil {
		a.retryStop()
		a.retryStop = nil
	}
}

// ---- replies ---------------------------------------------------------------

// answer replies to a pending request once and forgets it.
func (a *lockActor) answer(ctx actor.Context, r *request, res AcquireResult) {
	r.answered = true
	delete(a.pending, r.key)
	if r.stopTimer != nil {
		r.stopTimer()
	}
	if r.elem != nil {
		a.queue.Remove(r.elem)
		r.elem = nil
	}
	a.deliver(r, res)
	if r.from != nil {
		a.unwatch(ctx, r.from)
	}
}

func (a *lockActor) deliver(r *request, res AcquireResult) {
	if r.reply != nil {
		r.reply <- res
		return
	}
	resp := &messages.AcquireResponse{RequestId: r.protoID, Error: protoError(res.Err), HoldCount: res.HoldCount}
	if res.Err == nil {
		resp.Acquired, resp.FencingToken = true, res.Token
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
	if w == nil {
		w = &watchRef{pid: pid}
		a.watched[k] = w
		ctx.Watch(pid)
	}
	w.refs++
}

func (a *lockActor) unwatch(ctx actor.Context, pid *actor.PID) {
	k := pidKey(pid)
	if w := a.watched[k]; w != nil {
		if w.refs--; w.refs <= 0 {
			delete(a.watched, k)
			ctx.Unwatch(pid)
		}
	}
}

// ownerStopped releases everything an actor that stopped held or waited for.
func (a *lockActor) ownerStopped(ctx actor.Context, who *actor.PID) {
	k := pidKey(who)
	if _, ok := a.watched[k]; !ok {
		return
	}
	delete(a.watched, k)
	for _, r := range a.pending {
		if r.from != nil && pidKey(r.from) == k {
			r.reply, r.from = nil, nil // nobody to tell
			a.markAnswered(r)
		}
	}
	for _, h := range a.holds {
		if h.from != nil && pidKey(h.from) == k {
			a.releaseAll(h, lostError("the owner actor stopped"))
		}
	}
}

// markAnswered forgets a request without replying (its caller is gone).
func (a *lockActor) markAnswered(r *request) {
	r.answered = true
	delete(a.pending, r.key)
	if r.stopTimer != nil {
		r.stopTimer()
	}
	if r.elem != nil {
		a.queue.Remove(r.elem)
		r.elem = nil
	}
}

// releaseAll ends every grant of h and queues the release of all its holds.
func (a *lockActor) releaseAll(h *hold, cause error) {
	for _, g := range h.grants {
		a.endGrant(g, cause)
	}
	a.ops = append(a.ops, &op{
		kind: opRelease, owner: h.owner, holds: max(h.count, 1),
		requestID: a.env.NewRequestID(),
	})
	h.grants, h.watchdogs, h.from = nil, 0, nil
	a.syncRenewal(h)
}

// ---- subscription, idleness, shutdown --------------------------------------

// syncSubscription keeps this actor subscribed to the unlock channel while
// local requests wait for a lock another owner holds. An uncontended
// acquisition never subscribes; a contended name stays subscribed until its
// queue empties, so a busy lock does not subscribe once per hand-over.
func (a *lockActor) syncSubscription(ctx actor.Context) {
	waiting := a.queue.Len() > 0 || (a.inflight != nil && a.inflight.fromQueue)
	if !waiting {
		a.contended = false
	}
	switch {
	case waiting && a.contended && !a.subscribed:
		a.subscribed = true
		ctx.Send(a.env.router, &Subscribe{Topic: a.channel, Subscriber: a.self})
	case !a.contended && a.subscribed:
		a.subscribed, a.live = false, false
		ctx.Send(a.env.router, &Unsubscribe{Topic: a.channel, Subscriber: a.self})
	}
}

func (a *lockActor) idle() bool {
	return len(a.holds) == 0 && len(a.pending) == 0 && a.inflight == nil && len(a.ops) == 0 && !a.subscribed
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
	a.stopRetry()
	a.stopValidity()
	for _, r := range a.pending {
		a.answer(ctx, r, AcquireResult{Err: ErrClosed})
	}
	for _, h := range a.holds {
		a.releaseAll(h, lostError("the lock actor stopped"))
	}
	for _, o := range a.ops {
		if o.kind == opRelease && o.grant == nil {
			args := scripts.UnlockArgs{
				Name: a.key.Name, Owner: o.owner, RequestID: o.requestID, Holds: o.holds,
				IfCount: -1, LatchTTL: a.env.LatchTTL,
			}
			a.env.goCall(nil, func(ctx context.Context) any {
				_, _ = scripts.UnlockLock(ctx, a.env.Redis, args)
				return nil
			})
		}
	}
	a.ops = nil
	if a.subscribed {
		a.subscribed, a.live = false, false
		ctx.Send(a.env.router, &Unsubscribe{Topic: a.channel, Subscriber: a.self})
	}
}

func samePID(x, y *actor.PID) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.Address == y.Address && x.Id == y.Id
}
