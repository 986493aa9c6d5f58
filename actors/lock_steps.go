package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/internal/sentinel"
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

// guardedStep is a step whose script changes the lock, and so runs under
// a duplicate guard (scripts.Guard), the same for every attempt of one run:
// Redis acts on it once, and when its outcome is unknown (no attempt's
// reply came back) it is settled before anything else runs (settleStep),
// so apply learns what it did, or that it did nothing and never will.
// A step is thus over for the actor only once it is over for Redis.
type guardedStep interface {
	step
	// owners are whose Redis state the step may change: nothing grants
	// to them while its outcome is being settled.
	owners() []string
	// lease is how long what the step acts on lasts in Redis unrenewed (the
	// hold's lease): it is settled for as long (see guardFor).
	lease(a *lockActor) time.Duration
}

// scriptCall runs a step's script under g, the guard of this run of the
// step (every attempt of the run passes the same one; g.Settle asks what
// the run did instead of acting). It writes its outcome into its step,
// which the actor reads only once the stepDone arrives.
type scriptCall func(ctx context.Context, g scripts.Guard) error

// stepDone is the outcome of a step's script.
type stepDone struct {
	step   step
	sentAt time.Time // when the run's first attempt was sent
	err    error
	call   scriptCall    // the run's script, to settle it with
	guard  scripts.Guard // the run's guard
	tries  int           // attempts sent
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
		keep  time.Duration       // fair: a give-back keeps the owner's place at the head that long (0: no)
	}
)

// run starts s and, if it has a script, puts it in flight.
func (a *lockActor) run(ctx actor.Context, s step) {
	call := s.start(a, ctx)
	if call == nil {
		return
	}
	a.inflight = s
	g := a.guardFor(s)
	a.env.goCall(a.self, func(ctx context.Context) any {
		d := &stepDone{step: s, call: call, guard: g, sentAt: time.Now()}
		d.err = retryUnknown(ctx, func(ctx context.Context, attempt int) error {
			d.tries = attempt + 1
			if attempt > 0 && mutant.On(8) && isRelease(s) {
				g.ID = g.ID + "'" // the defect: a retry that its first attempt cannot see
			}
			return call(ctx, g)
		})
		return d
	})
}

// guardFor is the guard of a run of s: a request id of its own (a run
// that did nothing, settled so, leaves its id marked: a later run needs
// another), and, for a guarded step, a spent guard to delete on the way.
// The guard lives (guardTTL) until no attempt of the run can act any more
// and the run can no longer be settled: its settling goes on while what
// it acts on may last in Redis unrenewed (a lease), so that an Unlock sent
// into a stalled Redis is carried through once Redis answers, however long
// the stall, as long as the hold could still be there.
func (a *lockActor) guardFor(s step) scripts.Guard {
	g := scripts.Guard{ID: a.env.NewRequestID(), TTL: a.env.GuardTTL, Clock: a.env.Clock}
	if gs, ok := s.(guardedStep); ok {
		g.TTL = a.guardTTL(gs)
	}
	if mutant.On(11) && isRelease(s) {
		g.TTL, g.Clock = a.env.CallTimeout/4, nil // the defect: a guard that attempts outlive
	}
	if _, ok := s.(guardedStep); ok && len(a.spent) > 0 {
		g.Spent = a.spent[len(a.spent)-1]
		a.spent = a.spent[:len(a.spent)-1]
	}
	return g
}

// guardTTL is how long the guard of a run of s lives: GuardTTL (an attempt
// acts, and a run whose outcome is unknown is settled, within two call
// timeouts of its first attempt), plus what s acts on may last unrenewed.
func (a *lockActor) guardTTL(s guardedStep) time.Duration {
	return a.env.GuardTTL + s.lease(a)
}

// spend notes the guard of a run whose one attempt was answered: no other
// attempt of it can arrive, so the next guarded step deletes it rather
// than leave Redis a key per request. A few are kept; the rest expire.
func (a *lockActor) spend(id string) {
	if len(a.spent) == cap(a.spent) && len(a.spent) >= maxSpent {
		copy(a.spent, a.spent[1:])
		a.spent = a.spent[:len(a.spent)-1]
	}
	a.spent = append(a.spent, id)
}

const maxSpent = 4

// stepped takes the outcome of the step in flight: a guarded step's whose
// outcome is unknown is settled first; every other is applied.
func (a *lockActor) stepped(ctx actor.Context, d *stepDone) {
	gs, guarded := d.step.(guardedStep)
	if guarded && d.err == nil && d.tries == 1 {
		a.spend(d.guard.ID)
	}
	if guarded && unsettled(d.err) && !(mutant.On(3) && isRelease(d.step)) {
		a.tellUnknown(ctx, d)
		s := &settleStep{done: d, owners: gs.owners(), giveUpAt: d.sentAt.Add(d.guard.TTL - a.env.CallTimeout)}
		_, s.attempt = d.step.(*attemptStep)
		for _, o := range s.owners {
			a.settle(o)
			if s.attempt {
				a.attempting[o]++
			}
		}
		if r := releaseIn(d.step); r != nil {
			a.unreleasing[r.owner]++
		}
		a.first(s)
		return
	}
	if mutant.On(3) && unsettled(d.err) {
		d.err = scripts.ErrNotRun // the defect: an unknown release taken for one that never ran
	}
	d.step.apply(a, ctx, d)
}

func isRelease(s step) bool { _, ok := s.(*releaseStep); return ok }

// tellUnknown answers the caller of a run whose outcome is unknown at
// once, with the error: Redis did not answer within the call timeout, and
// the caller learns that when it would have without settling. Settling
// goes on: a grant it finds is given back (its request is answered), and
// a release it finds done ends its acquisition as unlocked (an Unlock
// called again reports that).
func (a *lockActor) tellUnknown(ctx actor.Context, d *stepDone) {
	switch s := d.step.(type) {
	case *attemptStep:
		if !s.req.answered {
			a.answer(ctx, s.req, AcquireResult{Err: sentinel.Op("acquire", a.key.Name, d.err)})
		}
	case *releaseStep:
		s.fail(a, d.err)
	}
}

// unsettled reports whether a step's script may have acted in Redis
// without its reply coming back (an attempt's connection broke, or Redis
// did not answer in time), whatever later attempts met: its outcome is
// unknown. A reply from Redis to the only attempt that may have acted
// (even an error: the scripts fail before they write), a dial that failed,
// and ErrNotRun are known outcomes: nothing was done.
func unsettled(err error) bool {
	var earlier *earlierTry
	var unknown *unknowable
	if errors.As(err, &earlier) || errors.As(err, &unknown) {
		// An earlier attempt may have acted, whatever the last one (or
		// the last settle) met.
		return true
	}
	return err != nil && mayHaveRun(err) && !isReply(err)
}

// settleStep settles the run of a guarded step whose outcome is unknown:
// its script again, in settle mode (scripts.Guard.Settle), which returns
// what an attempt of the run did, or marks the run so that none acts
// later. It goes first, and until it is done nothing grants to the owners
// the run may have acted for (their attempts are parked: giveback.go):
// the actor does not know what Redis has of them. Other owners' steps go
// on meanwhile. It is tried again until Redis answers, as long as the
// guard is sure to live (giveUpAt, which Redis itself holds every settle
// to: one that arrives later answers scripts.ErrTooLate); then the outcome
// stays unknown, and the step's apply gets that.
type settleStep struct {
	done     *stepDone
	owners   []string
	giveUpAt time.Time
	tries    uint8
	attempt  bool // it settles an attempt (attempting)
}

func (s *settleStep) start(*lockActor, actor.Context) scriptCall {
	d, giveUpAt := s.done, s.giveUpAt
	return func(ctx context.Context, _ scripts.Guard) error {
		g := d.guard
		g.Settle, g.Spent, g.Until = true, "", giveUpAt
		return d.call(ctx, g)
	}
}

func (s *settleStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	pause := min(50*time.Millisecond<<(s.tries+1), time.Second)
	if !settledBy(d.err) && time.Now().Add(pause).Before(s.giveUpAt) && !mutant.On(17) {
		s.tries++
		a.runLater(pause, s)
		return
	}
	if r := releaseIn(s.done.step); r != nil {
		if a.unreleasing[r.owner]--; a.unreleasing[r.owner] == 0 {
			delete(a.unreleasing, r.owner)
			a.unparkUndos(r.owner)
		}
	}
	for _, o := range s.owners {
		if s.attempt {
			if a.attempting[o]--; a.attempting[o] == 0 {
				delete(a.attempting, o)
				a.unparkUndos(o)
			}
		}
		a.settled(o)
	}
	done := *s.done
	done.tries, done.err = 0, settleAnswer(d.err)
	if !settledBy(d.err) && !mutant.On(17) {
		done.err = &unknowable{err: d.err}
	}
	if a.env.ReplicaSync.Replicas > 0 {
		// What replicas confirmed was the settle's writes, not the run's.
		switch st := done.step.(type) {
		case *attemptStep:
			st.acked = 0
		case *releaseStep:
			st.acked = 0
		}
	}
	done.step.apply(a, ctx, &done)
}

// settle settles, on the calling goroutine, a run of call under g whose
// outcome is unknown (first: when its first attempt was sent), as
// settleStep does for the lock actor: call again in settle mode until Redis
// answers or g could expire. It returns call's outcome (call has written
// it), scripts.ErrNotRun, or an unknowable error.
func (e *runtimeEnv) settle(first time.Time, g scripts.Guard, call func(context.Context, scripts.Guard) error) error {
	giveUpAt := first.Add(g.TTL - e.CallTimeout)
	g.Settle, g.Spent, g.Until = true, "", giveUpAt
	ctx, cancel := context.WithDeadline(e.givingBack, giveUpAt)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		err := call(ctx, g)
		if settledBy(err) {
			return settleAnswer(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return &unknowable{err: err}
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// settledBy reports whether a settle call got Redis's answer about the run
// it settles: what an attempt did, or that none did (ErrNotRun). Any other
// failure, even one that never reached Redis (a refused dial), tells
// nothing about the run, which may have acted: settling goes on.
func settledBy(err error) bool { return err == nil || errors.Is(err, scripts.ErrNotRun) }

// settleAnswer is the run's outcome as a settle that got Redis's answer
// tells it: that answer, final, whatever the settle's own earlier attempts
// met (the earlier one that may have run could only have read or marked
// the guard, which the answer reflects). An unsettled error is kept.
func settleAnswer(err error) error {
	var earlier *earlierTry
	if settledBy(err) && errors.As(err, &earlier) {
		return earlier.err
	}
	return err
}

// unknowable is the outcome of a run that could not be settled: Redis did
// not answer for as long as the run's guard is sure to live. Whatever the
// run did is beyond knowing; it may have acted.
type unknowable struct{ err error }

func (e *unknowable) Error() string {
	return "its outcome could not be learnt (Redis did not answer): " + e.err.Error()
}

func (e *unknowable) Unwrap() error { return e.err }

// ---- attempt ---------------------------------------------------------------

type attemptStep struct {
	req   *request
	seen  int64  // the owner's count when it started
	other int64  // read-write lock: the owner's count on the other side when it started
	wakes uint64 // lockActor.wakes when it started

	grant scripts.Grant // outcome
	acked int64         // replicas that confirmed it (-1: not asked)
}

func (s *attemptStep) owners() []string { return []string{s.req.owner} }

func (s *attemptStep) lease(a *lockActor) time.Duration { return s.req.leaseOr(a.env.Watchdog) }

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
	s.seen, s.other = 0, 0
	if h != nil {
		s.seen, s.other = h.counted(r.write()), h.counted(!r.write())
	}
	s.wakes = a.wakes
	r.inflight = true
	r.tries++
	args := attemptArgs{
		AcquireArgs: scripts.AcquireArgs{Name: a.key.Name, Owner: r.owner, Lease: r.leaseOr(a.env.Watchdog), TokenTTL: a.env.TokenTTL},
		write:       r.write(), enqueue: !r.tryOnce, wait: a.placeWait(r),
	}
	env, fam, span := a.env, a.fam, r.span()
	return func(ctx context.Context, g scripts.Guard) (err error) {
		ctx = withSpan(ctx, span)
		rdb, ack := env.scriptClient()
		s.grant, err = fam.acquire(ctx, rdb, args, g)
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
	requestID string                // the release request's id: a message's retry joins it
	replies   []func(ReleaseResult) // the Unlock calls waiting for its outcome
	span      trace.SpanContext     // the Go caller's span, for its script call
	next      *request              // the waiter the lock is handed to, if any
	retrying  bool                  // tried again by the actor after a failure (releaseFailed)
	told      bool                  // its callers so far were told it failed: later ones wait for the outcome
	tries     uint8                 // failed runs so far
	// out: sent, its outcome not known yet (in flight or being settled:
	// hold.releasing); drained: a release of every hold of its owner
	// (releaseAll) left this one's holds to it, and takes them on if it
	// turns out not to have run.
	out, drained bool
	giveUpAt     time.Time // a departed owner's (grant nil), or drained: its holds' validity, past which they must not be released unconditionally

	unlock scripts.Unlock // outcome
	handed scripts.Grant  // next's grant
	acked  int64
}

func (s *releaseStep) lease(a *lockActor) time.Duration {
	if s.grant != nil {
		return max(s.grant.lease, a.env.Watchdog)
	}
	return a.env.Watchdog
}

func (s *releaseStep) owners() []string {
	if s.next != nil {
		return []string{s.owner, s.next.owner}
	}
	return []string{s.owner}
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

// fail tells the release's callers that it failed, once: an Unlock called
// again while the actor carries the release through joins it, and hears
// its outcome.
func (s *releaseStep) fail(a *lockActor, err error) {
	if !s.told {
		s.tell(ReleaseResult{Err: sentinel.Op("unlock", a.key.Name, err)})
	}
}

// tell answers every caller still waiting with res: an Unlock called
// again from now on joins the release and hears its outcome.
func (s *releaseStep) tell(res ReleaseResult) {
	s.answer(res)
	s.replies, s.told = nil, true
}

// closed answers every caller of s still waiting, those that joined it
// after it failed too, when the actor stops: with what became of its hold
// if that ended, else ErrClosed (why: where the release stood).
func (s *releaseStep) closed(a *lockActor, why string) {
	res := ReleaseResult{Err: sentinel.Op("unlock", a.key.Name, fmt.Errorf("%w %s", ErrClosed, why))}
	if g := s.grant; g != nil && g.ended != nil {
		res = endedRelease(g.ended)
	}
	s.tell(res)
}

// releaseIn is the release s runs or settles, if any.
func releaseIn(s step) *releaseStep {
	switch s := s.(type) {
	case *releaseStep:
		return s
	case *settleStep:
		r, _ := s.done.step.(*releaseStep)
		return r
	}
	return nil
}

func (s *releaseStep) start(a *lockActor, ctx actor.Context) scriptCall {
	h := a.holds.get(s.owner)
	if g := s.grant; g != nil {
		if g.ended != nil || h == nil {
			// The acquisition ended (lost, closed, released with the
			// owner's last hold) before this release ran: a hold of the
			// same owner granted since is not this one to release.
			s.retrying = false
			s.answer(endedRelease(g.ended))
			return nil
		}
	} else if !s.giveUpAt.IsZero() && !time.Now().Before(s.giveUpAt) {
		// A departed owner's holds may have expired by now, and its id been
		// taken afresh: this release would delete that hold.
		s.answer(ReleaseResult{Err: sentinel.Op("unlock", a.key.Name, lostError("the holds' validity ended before their release could run"))})
		return nil
	}
	if (a.attempting[s.owner] > 0 || a.settlingFor(s.owner)) && !mutant.On(22) {
		// An attempt of the owner may have started a fresh hold (the lock
		// was deleted under the old one): this release must not release
		// it in the old one's name. It runs once that is settled (and
		// what settling found given back). Nor may it run while a
		// give-back of the owner is out: a give-back refused and tried
		// again later leaves the queue meanwhile, and a release run in
		// between would take the hold the give-back expects to find.
		a.parked = append(a.parked, s)
		return nil
	}
	if g := s.grant; g != nil {
		if s.retrying && g.watchdog {
			// Not renewed while released (queueRelease).
			h.watchdogs--
			a.syncRenewal(h)
		}
	}
	if h != nil {
		releasing(h, s)
		a.armValidity()
	}
	s.out = true
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

// call is the release's script (also run by stop, with nobody to answer).
func (s *releaseStep) call(a *lockActor) scriptCall {
	args := releaseArgs{
		UnlockArgs: scripts.UnlockArgs{Name: a.key.Name, Owner: s.owner, Holds: s.holds, IfCount: -1},
		write:      s.write,
	}
	if r := s.next; r != nil {
		args.next = scripts.AcquireArgs{Owner: r.owner, Lease: r.leaseOr(a.env.Watchdog), TokenTTL: a.env.TokenTTL}
	}
	env, fam, span, giveUpAt := a.env, a.fam, s.span, s.giveUpAt
	if h := a.holds.get(s.owner); s.grant != nil && h != nil {
		// As long as the hold is valid, were this release not to run.
		if until := epoch.Add(h.uncut()); giveUpAt.IsZero() || until.Before(giveUpAt) {
			giveUpAt = until
		}
	}
	return func(ctx context.Context, g scripts.Guard) (err error) {
		ctx = withSpan(ctx, span)
		if !giveUpAt.IsZero() && !g.Settle {
			// A release is unconditional: an attempt held back past its
			// holds' validity would delete a fresh hold of the id (taken
			// through another runtime once they expired: RT23-1, RT29-1).
			// Redis refuses it then, as it refuses one past its call's
			// deadline (ErrNotRun).
			g.Until = giveUpAt
			if until, ok := env.Clock.ActsUntil(ctx); ok && until.Before(giveUpAt) {
				g.Until = until
			}
		}
		rdb, ack := env.scriptClient()
		s.unlock, s.handed, err = fam.release(ctx, rdb, args, g)
		s.acked = ack()
		return err
	}
}

func (s *releaseStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	if s.next != nil {
		s.next.inflight = false
	}
	s.retrying = false
	a.released(ctx, s, d)
	a.settleGaveUp(s.next, s.handed.Acquired)
}

// releaseTarget is the local waiter a release may hand the lock to in the
// same script, or nil: only when the owner releases its last hold, and to
// the head the family allows (handsTo).
//
// Not to a waiter whose owner's Redis work is unsettled (giveback.go).
func (a *lockActor) releaseTarget(h *hold, s *releaseStep) *request {
	if s.grant == nil || h == nil || h.count != 1 || a.queue.waiting() == 0 {
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
	owner   string
	write   bool
	holds   int64 // 0 means 1
	ifCount int64
	token   int64         // what the holds must still show (hold.mark; 0: not checked)
	keep    time.Duration // fair: the owner keeps its place at the head that long (0: no)
	// readTokens (read give-backs of a hold) are the tokens of the owner's
	// read-hold keys 1..ifCount: the token checked follows ifCount when a
	// release in flight lowers it (undone).
	readTokens []int64
	giveUpAt   time.Time
	// validTo: until when its holds were surely in Redis (zero: not
	// known): a newer grant of a WithOwner id's write that ran before it
	// re-entered them, and its token is theirs (giveBack).
	validTo time.Time
	seq     uint64 // the order give-backs were queued in (lockActor.undoSeq; runsBefore)
	// void: what it expects became unknowable (releaseUnknown); it does
	// nothing when due.
	void bool

	unlock scripts.Unlock // outcome
}

// undoBefore reports whether a give-back of s's owner and side that is to
// run before s (runsBefore) is still to run or to be settled (queued,
// parked, or waiting to be retried).
func (a *lockActor) undoBefore(s *undoStep) bool {
	for u := range a.undos {
		if runsBefore(u, s) {
			return true
		}
	}
	return false
}

// runsBefore orders the give-backs of one owner's side: each expects the
// count the ones before it leave, so the one expecting the most holds goes
// first, and of those expecting as many, the newest sight. Not the order
// they were queued in: a lost hold's give-back expects the count as this
// runtime holds it, which leaves out a late grant whose own give-back,
// queued before it, is still out (RT24-1).
func runsBefore(u, s *undoStep) bool {
	if u == s || u.owner != s.owner || u.write != s.write {
		return false
	}
	if u.ifCount != s.ifCount {
		return u.ifCount > s.ifCount
	}
	return u.seq > s.seq
}

// extendUndos has the give-backs of owner's holds on that side still to
// run or be settled tried for at least lease from now (the holds may last
// that long: an Extend ran).
func (a *lockActor) extendUndos(owner string, write bool, lease time.Duration) {
	giveUpAt := time.Now().Add(lease + a.env.CallTimeout)
	for u := range a.undos {
		if u.owner == owner && u.write == write && giveUpAt.After(u.giveUpAt) {
			u.giveUpAt = giveUpAt
		}
	}
}

// undos yields the give-backs still to run or be settled: queued, parked,
// waiting to be retried, being settled, or in flight.
func (a *lockActor) undos(yield func(*undoStep) bool) {
	for x := range a.pending {
		if u, ok := x.(*undoStep); ok && !yield(u) {
			return
		}
	}
}

// pending yields the steps still to run or be settled, wherever they wait:
// queued, parked, on a timer (later), in flight, or being settled (the
// step a settleStep settles).
func (a *lockActor) pending(yield func(step) bool) {
	visit := func(x step) bool {
		if st, ok := x.(*settleStep); ok {
			x = st.done.step
		}
		return yield(x)
	}
	for _, list := range [2][]step{a.steps, a.parked} {
		for _, x := range list {
			if !visit(x) {
				return
			}
		}
	}
	for x := range a.later {
		if !visit(x) {
			return
		}
	}
	if a.inflight != nil {
		visit(a.inflight)
	}
}

func (s *undoStep) owners() []string { return []string{s.owner} }

func (s *undoStep) lease(*lockActor) time.Duration { return max(time.Until(s.giveUpAt), 0) }

func (s *undoStep) start(a *lockActor, _ actor.Context) scriptCall {
	if s.void {
		a.settled(s.owner)
		return nil
	}
	if a.unreleasing[s.owner] > 0 || a.attempting[s.owner] > 0 {
		// A release of the owner is being settled: an attempt of it may
		// still land, and what it releases is what this expects to find.
		// Or an attempt of it is: it may have granted a hold that this
		// would meet counted, refused and dropped, and whose give-back,
		// once settling finds it, runs before this one (RT25-1). It runs
		// once that outcome is known (unparkUndos).
		a.parked = append(a.parked, s)
		return nil
	}
	if a.undoBefore(s) {
		// Give-backs of one owner's side run in order (runsBefore): each
		// expects the count the ones before it leave. A retry's timer can
		// fire before theirs (a loaded machine): this one would then meet
		// the count it expects plus theirs, be refused, and be dropped.
		a.runLater(100*time.Millisecond, s)
		return nil
	}
	return s.call(a)
}

// call is the give-back's script call, once nothing it waits for is left.
func (s *undoStep) call(a *lockActor) scriptCall {
	args := releaseArgs{
		UnlockArgs: scripts.UnlockArgs{Name: a.key.Name, Owner: s.owner, Holds: max(s.holds, 1), IfCount: s.ifCount, IfToken: s.token},
		write:      s.write, keep: s.keep,
	}
	if mutant.On(21) {
		args.IfToken = 0
	}
	env, fam := a.env, a.fam
	return func(ctx context.Context, g scripts.Guard) (err error) {
		rdb, _ := env.scriptClient()
		s.unlock, _, err = fam.release(ctx, rdb, args, g)
		return err
	}
}

func (s *undoStep) apply(a *lockActor, _ actor.Context, d *stepDone) {
	if d.err != nil && !unsettled(d.err) && a.retryLater(s, s.giveUpAt) {
		return
	}
	if d.err == nil && s.unlock.State == scripts.CountChanged && a.undoBefore(s) && a.retryLater(s, s.giveUpAt) {
		// A give-back to run before this one was queued while this one
		// was out: it found that one's hold still counted. It runs again
		// after it.
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

func (s *leaveStep) owners() []string { return []string{s.owner} }

func (s *leaveStep) lease(a *lockActor) time.Duration { return a.env.Watchdog }

func (s *leaveStep) start(a *lockActor, _ actor.Context) scriptCall {
	rdb, name, owner := a.env.Redis, a.key.Name, s.owner
	return func(ctx context.Context, g scripts.Guard) error {
		_, err := scripts.LeaveFair(ctx, rdb, name, owner, g)
		return err
	}
}

func (s *leaveStep) apply(a *lockActor, _ actor.Context, d *stepDone) {
	a.deliverGaveUp(s.req)
	if d.err != nil && !unsettled(d.err) {
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
	return func(ctx context.Context, _ scripts.Guard) (err error) {
		s.deleted, err = fam.force(ctx, rdb, name, write)
		return err
	}
}

func (s *forceStep) apply(a *lockActor, ctx actor.Context, d *stepDone) {
	a.forced(ctx, s, d.err)
}

// ---- spent guards ------------------------------------------------------------

// spentStep deletes the guards of runs no attempt of which can arrive any
// more (spend) when no script follows to do it: Close drains the name.
// (A name that goes idle deletes them when its actor stops: stop.)
type spentStep struct{ ids []string }

func (s *spentStep) start(a *lockActor, _ actor.Context) scriptCall {
	rdb, name, ids := a.env.Redis, a.key.Name, s.ids
	return func(ctx context.Context, _ scripts.Guard) error {
		return scripts.DeleteGuards(ctx, rdb, name, ids)
	}
}

func (s *spentStep) apply(*lockActor, actor.Context, *stepDone) {}

// ---- order -------------------------------------------------------------------

// first queues s before every other step waiting to run.
func (a *lockActor) first(s step) {
	a.steps = append(a.steps, nil)
	copy(a.steps[1:], a.steps)
	a.steps[0] = s
}

// retryLater re-runs an undo or leave that did not run, until the
// hold or queue place would have expired anyway (giveUpAt): nobody renews
// it, so its lease (or the fair wait) bounds what an unreachable Redis
// costs. Close waits for it, up to its ctx. It reports whether s will run
// again.
func (a *lockActor) retryLater(s step, giveUpAt time.Time) bool {
	if time.Now().Before(giveUpAt) {
		a.runLater(100*time.Millisecond, s)
		return true
	}
	return false
}

// runLater runs s first after pause. The actor is not idle meanwhile.
func (a *lockActor) runLater(pause time.Duration, s step) {
	if a.later == nil {
		a.later = map[step]int{}
	}
	a.later[s]++
	a.env.timers.SendOnce(pause, a.self, &stepDue{step: s})
}
