package actors

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/scripts"
)

// step is one Lua call of the lock actor: an attempt, a release, an undo,
// a fair waiter leaving the queue, a forced unlock. At most one is in
// flight. Its script runs off the actor (runtimeEnv.goCall), re-attempted while
// its outcome is unknown, and its outcome comes back as a *stepDone that
// the step applies on the actor.
type step interface {
	// start runs on the actor when the step's turn comes: it checks that
	// the step is still wanted and returns its script call, which has
	// captured all it needs; nil: nothing to run.
	start(a *lockActor, ctx actor.Context) scriptCall
	// apply applies the outcome on the actor.
	apply(a *lockActor, ctx actor.Context, d *stepDone)
}

// scriptCall runs a step's script; retry is set on a re-attempt after an
// unknown outcome. It writes its outcome into its step, which the actor
// reads only once the stepDone arrives.
type scriptCall func(ctx context.Context, retry bool) error

// stepDone is the outcome of a step's script.
type stepDone struct {
	step   step
	sentAt time.Time // when the last try was sent
	err    error
}

// stepDue is a step to run first, after a pause (runLater).
type stepDue struct{ step step }

// attemptArgs and releaseArgs are what a family's scripts take.
type (
	attemptArgs struct {
		scripts.AcquireArgs
		write   bool
		enqueue bool          // fair: join the Redis queue if refused
		wait    time.Duration // fair: how long a place is kept
	}
	releaseArgs struct {
		scripts.UnlockArgs
		write bool
		next  scripts.AcquireArgs // the waiter a release hands to; Owner "": none
		wait  time.Duration
		retry bool
	}
)

// run starts s and, if it has a script, puts it in flight.
func (a *lockActor) run(ctx actor.Context, s step) {
	call := s.start(a, ctx)
	if call == nil {
		return
	}
	a.inflight = s
	a.env.goCall(a.self, func(ctx context.Context) any {
		d := &stepDone{step: s}
		d.err = retryUnknown(ctx, func(ctx context.Context, attempt int) error {
			d.sentAt = time.Now()
			return call(ctx, attempt > 0)
		})
		return d
	})
}

// ---- attempt ---------------------------------------------------------------

type attemptStep struct {
	req   *request
	seen  int64  // the owner's count when it started
	last  int64  // what tells an earlier attempt's effect: see start (0: nothing)
	other int64  // read-write lock: the owner's count on the other side when it started
	wakes uint64 // lockActor.wakes when it started

	grant scripts.Grant // outcome
	acked int64         // replicas that confirmed it (-1: not asked)
}

func (s *attemptStep) start(a *lockActor, ctx actor.Context) scriptCall {
	r := s.req
	if r.answered {
		return nil
	}
	if a.settlingFor(r.owner) {
		a.parked = append(a.parked, s)
		return nil
	}
	h := a.holds.get(r.owner)
	if h == nil && r.tryOnce && a.fam.blocked(&a.holds, r) {
		a.answer(ctx, r, AcquireResult{Err: ErrNotAcquired, HolderTTL: a.localTTL()})
		return nil
	}
	// An owner id this runtime made is used by nobody else (see below).
	own := strings.HasPrefix(r.owner, a.env.RuntimeID+":")
	if h != nil {
		s.seen, s.other = h.counted(r.write()), h.counted(!r.write())
		if own {
			// The scripts tell by it whether an earlier attempt took
			// effect (an id given by the caller may be shared with
			// another process, whose grants would fool them): only its
			// own grants move the counter while it holds an exclusive
			// lock, and only they write its read-hold keys.
			s.last = h.token
			if a.fam.shares() && !r.write() {
				s.last = 0
				if n := s.seen; n > 0 && n <= int64(len(h.reads)) {
					s.last = h.reads[n-1].token
				}
			}
		}
	}
	s.wakes = a.wakes
	r.inflight = true
	r.tries++
	args := attemptArgs{
		AcquireArgs: scripts.AcquireArgs{
			Name: a.key.Name, Owner: r.owner, Lease: r.leaseOr(a.env.Watchdog), Seen: -1, TokenTTL: a.env.TokenTTL,
		},
		write: r.write(), enqueue: !r.tryOnce, wait: a.placeWait(r),
	}
	args.Last = s.last
	env, fam, seen, span := a.env, a.fam, s.seen, r.span()
	// An owner id this runtime made is used by nobody else, so its count
	// in Redis beyond the one seen here can only be this request's own
	// doing: every attempt then tells the script the count seen, so that
	// an earlier attempt reaching Redis after its retry (a connection
	// whose bytes were still on their way when its reply timed out) cannot
	// count the hold twice. An id given by the caller (WithOwner) may be
	// shared with a Redisson thread whose holds count too: only a
	// re-attempt after an unknown outcome tells the count then.
	return func(ctx context.Context, retry bool) (err error) {
		ctx = withSpan(ctx, span)
		if retry || own {
			args.Seen = seen
		}
		rdb, ack := env.scriptClient()
		s.grant, err = fam.acquire(ctx, rdb, args)
		s.acked = ack()
		return err
	}
}

func (s *attemptStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	s.req.inflight = false
	a.attempted(ctx, s, d)
	a.settleGaveUp(s.req, s.grant.Acquired)
}

// ---- release ---------------------------------------------------------------

type releaseStep struct {
	owner     string
	write     bool
	grant     *grant // the acquisition released; nil: holds of a departed owner
	holds     int64
	requestID string // unlock latch id
	fresh     bool   // no earlier release with requestID was sent (UnlockArgs.Fresh)
	basis     releaseBasis
	replies   []func(ReleaseResult) // the Unlock calls waiting for its outcome
	span      trace.SpanContext     // the Go caller's span, for its script call
	next      *request              // the waiter the lock is handed to, if any
	retrying  bool                  // tried again by the actor after a failure (releaseFailed)
	settling  bool                  // its owner's work is unsettled until this retry ends
	tries     uint8                 // failed attempts so far

	unlock scripts.Unlock // outcome
	handed scripts.Grant  // next's grant
	acked  int64
}

// join adds an Unlock call to those told the outcome.
func (s *releaseStep) join(reply func(ReleaseResult)) {
	if reply != nil {
		s.replies = append(s.replies, reply)
	}
}

func (s *releaseStep) answer(res ReleaseResult) {
	for _, reply := range s.replies {
		reply(res)
	}
}

func (s *releaseStep) start(a *lockActor, ctx actor.Context) scriptCall {
	h := a.holds.get(s.owner)
	if g := s.grant; g != nil {
		if g.ended != nil || h == nil {
			// The acquisition ended (lost, closed, released with the
			// owner's last hold) before this release ran: a hold of the
			// same owner granted since is not this one to release.
			a.retried(s)
			s.answer(endedRelease(g.ended))
			return nil
		}
		if s.retrying && g.watchdog {
			// Not renewed while released (queueRelease).
			h.watchdogs--
			a.syncRenewal(h)
		}
	}
	s.next = a.releaseTarget(h, s)
	if s.next != nil {
		s.next.inflight = true
	}
	return s.call(a)
}

// endedRelease is what the release of an acquisition that ended first
// reports: done if the owner's holds were released meanwhile, else why it
// ended.
func endedRelease(cause error) ReleaseResult {
	switch {
	case cause == nil:
		return ReleaseResult{Err: lostError("the hold ended before this unlock")}
	case errors.Is(cause, ErrUnlocked):
		return ReleaseResult{Released: true}
	}
	return ReleaseResult{Err: cause}
}

// retried ends the actor's own retry of s, if it was one.
func (a *lockActor) retried(s *releaseStep) {
	if s.retrying {
		s.retrying = false
		if s.settling {
			s.settling = false
			a.settled(s.owner)
		}
	}
}

// call is the release's script (also run by stop, with nobody to answer).
func (s *releaseStep) call(a *lockActor) scriptCall {
	args := releaseArgs{
		UnlockArgs: scripts.UnlockArgs{
			Name: a.key.Name, Owner: s.owner, RequestID: s.requestID, Holds: s.holds, IfCount: -1, LatchTTL: a.env.LatchTTL,
		},
		write: s.write, wait: a.env.FairWait,
	}
	if r := s.next; r != nil {
		args.next = scripts.AcquireArgs{Owner: r.owner, Lease: r.leaseOr(a.env.Watchdog), Seen: -1, TokenTTL: a.env.TokenTTL}
	}
	env, fam, span, fresh, again, basis := a.env, a.fam, s.span, s.fresh, s.again(), s.basis
	return func(ctx context.Context, retry bool) (err error) {
		ctx = withSpan(ctx, span)
		rdb, ack := env.scriptClient()
		args.retry = retry
		args.Fresh = fresh && !retry
		if retry || again {
			// An earlier attempt may have released the owner's last hold,
			// which leaves no latch: the script judges by what it expected.
			// Not on a first attempt, where a missing hold means lost.
			args.Expect, args.Counter = basis.expect, basis.counter
		}
		s.unlock, s.handed, err = fam.release(ctx, rdb, args)
		s.acked = ack()
		return err
	}
}

// again reports whether an earlier release of s's grant failed, so that it
// may have run.
func (s *releaseStep) again() bool { return s.grant != nil && s.grant.unlocking != nil }

func (s *releaseStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	if s.next != nil {
		s.next.inflight = false
	}
	a.retried(s)
	a.released(ctx, s, d)
	a.settleGaveUp(s.next, s.handed.Acquired)
}

// releaseTarget is the local waiter a release may hand the lock to in the
// same script, or nil: only when the owner releases its last hold, and to
// the head the family allows (handsTo).
//
// Not for a retry of a release that failed: its first attempt may have
// released the lock writing no latch, which only UnlockLock's retry tells.
//
// Not to a waiter whose owner's Redis work is unsettled (giveback.go).
func (a *lockActor) releaseTarget(h *hold, s *releaseStep) *request {
	if s.grant == nil || s.again() || h == nil || h.count != 1 || a.queue.waiting() == 0 {
		return nil
	}
	next := a.front()
	if next.inflight || next.owner == s.owner || !a.fam.handsTo(a, next) || (a.settlingFor(next.owner) && !mutant.On(1)) {
		return nil
	}
	return next
}

// ---- undo ------------------------------------------------------------------

// undoStep gives back holds of owner that nobody may use, only while Redis
// counts exactly ifCount of them, so a newer hold is never touched
// (giveback.go). Its owner's work stays unsettled until it is done.
type undoStep struct {
	owner     string
	write     bool
	holds     int64 // 0 means 1
	ifCount   int64
	requestID string
	giveUpAt  time.Time

	unlock scripts.Unlock // outcome
}

func (s *undoStep) start(a *lockActor, _ actor.Context) scriptCall {
	args := releaseArgs{
		UnlockArgs: scripts.UnlockArgs{
			Name: a.key.Name, Owner: s.owner, RequestID: s.requestID, Holds: max(s.holds, 1), IfCount: s.ifCount, LatchTTL: a.env.LatchTTL,
		},
		write: s.write, wait: a.env.FairWait,
	}
	env, fam := a.env, a.fam
	return func(ctx context.Context, retry bool) (err error) {
		rdb, _ := env.scriptClient()
		args.retry = retry
		s.unlock, _, err = fam.release(ctx, rdb, args)
		return err
	}
}

func (s *undoStep) apply(a *lockActor, _ actor.Context, d *stepDone) {
	if d.err != nil && a.retryLater(s, s.giveUpAt) {
		return
	}
	a.settled(s.owner)
	if d.err == nil && s.unlock.State == scripts.Released {
		a.headReady = true
	}
}

// ---- leave (fair lock) -------------------------------------------------------

type leaveStep struct {
	owner    string
	req      *request // whose answer waits for this leave (giveUpPlace)
	giveUpAt time.Time
}

func (s *leaveStep) start(a *lockActor, _ actor.Context) scriptCall {
	rdb, name, owner := a.env.Redis, a.key.Name, s.owner
	return func(ctx context.Context, _ bool) error {
		_, err := scripts.LeaveFair(ctx, rdb, name, owner)
		return err
	}
}

func (s *leaveStep) apply(a *lockActor, _ actor.Context, d *stepDone) {
	a.deliverGaveUp(s.req)
	if d.err != nil {
		a.retryLater(s, s.giveUpAt)
	}
}

// leaveIfQueued takes an abandoned fair waiter out of the Redis queue (if it
// may have joined it), so that nobody waits behind a place nobody will take.
// Not while another request of the same owner still waits: the owner has
// one place. It reports whether it queued a leave.
func (a *lockActor) leaveIfQueued(r *request, mayHaveJoined bool) bool {
	if !a.fam.queues() || r.left || !(r.enqueued || mayHaveJoined) {
		return false
	}
	for _, p := range a.queue.pending {
		if p.owner == r.owner {
			return false
		}
	}
	r.left = true
	a.first(&leaveStep{owner: r.owner, req: r, giveUpAt: time.Now().Add(a.env.FairWait + a.env.CallTimeout)})
	return true
}

// ---- force -------------------------------------------------------------------

type forceStep struct {
	write bool
	reply chan<- ForceUnlockResult

	deleted bool // outcome: a lock was deleted
}

func (s *forceStep) start(a *lockActor, _ actor.Context) scriptCall {
	rdb, name, fam, write := a.env.Redis, a.key.Name, a.fam, s.write
	return func(ctx context.Context, _ bool) (err error) {
		s.deleted, err = fam.force(ctx, rdb, name, write)
		return err
	}
}

func (s *forceStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	a.forced(ctx, s, d.err)
}

// ---- order -------------------------------------------------------------------

// first queues s before every other step waiting to run.
func (a *lockActor) first(s step) {
	a.steps = append(a.steps, nil)
	copy(a.steps[1:], a.steps)
	a.steps[0] = s
}

// retryLater re-runs an undo or leave that Redis did not answer, until the
// hold or queue place would have expired anyway (giveUpAt): nobody renews
// it, so its lease (or the fair wait) bounds what an unreachable Redis
// costs. Closing does not wait that long. It reports whether s will run
// again.
func (a *lockActor) retryLater(s step, giveUpAt time.Time) bool {
	if time.Now().Before(giveUpAt) && !a.draining {
		a.runLater(100*time.Millisecond, s)
		return true
	}
	return false
}

// runLater runs s first after pause. The actor is not idle meanwhile.
func (a *lockActor) runLater(pause time.Duration, s step) {
	a.due++
	a.env.timers.SendOnce(pause, a.self, &stepDue{step: s})
}
