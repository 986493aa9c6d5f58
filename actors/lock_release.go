package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// Releases, cancels and forced unlocks of the lock actor, and their
// outcomes.

func (a *lockActor) releaseGo(m *Release) {
	reply := func(res ReleaseResult) {
		if m.Reply != nil {
			m.Reply <- res
		}
	}
	h := a.holds.get(m.Owner)
	var g *grant
	if h != nil && !h.byMessage() {
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
	s := a.queueRelease(h, g, m.RequestID, reply)
	s.span, s.fresh = m.Span, m.Fresh
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
	h := a.holds.get(owner)
	write := m.Kind == messages.Kind_KIND_WRITE
	var g *grant
	if h != nil && h.byMessage() {
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
func (a *lockActor) queueRelease(h *hold, g *grant, requestID string, reply func(ReleaseResult)) *releaseStep {
	if g.watchdog {
		h.watchdogs--
	}
	a.syncRenewal(h)
	s := &releaseStep{owner: h.owner, write: g.write, grant: g, holds: 1, requestID: requestID, reply: reply,
		basis: releaseBasis{expect: h.counted(g.write), counter: h.token}}
	if g.unlocking != nil {
		s.basis = *g.unlocking
	}
	a.steps = append(a.steps, s)
	return s
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
	case a.queue.pending[reqKey{from: owner, id: m.RequestId}] != nil:
		a.cancel(ctx, reqKey{from: owner, id: m.RequestId})
		respond(true, nil)
	case a.knows(owner):
		respond(false, nil) // answered already
	default:
		respond(false, fmt.Errorf("%w: that owner_token holds or awaits nothing of lock %q here", ErrNotOwner, a.key.Name))
	}
}

// ---- outcomes ----------------------------------------------------------------

func (a *lockActor) released(ctx actor.Context, s *releaseStep, d *stepDone) {
	h := a.holds.get(s.owner)
	if d.err != nil {
		a.releaseFailed(s, h, d.err)
		if s.next != nil && mayHaveRun(d.err) {
			// The waiter may hold it now without knowing: undo, then retry.
			a.undo(s.next.owner, s.next.write(), 1)
			a.headReady = true
		}
		return
	}
	switch s.unlock.State {
	case scripts.Released:
		if h != nil {
			a.dropHold(ctx, h)
		}
		a.endGrant(s.grant, ErrUnlocked)
		s.answer(ReleaseResult{Released: true})
		a.releasedTo(ctx, s, d)
	case scripts.StillHeld:
		a.endGrant(s.grant, ErrUnlocked)
		s.answer(ReleaseResult{HoldCount: a.stillHeld(ctx, h, s)})
	default:
		a.releasedLost(ctx, s, h)
	}
}

// releasedTo follows a release that freed the lock: the hand-off's grant,
// or letting waiters try.
func (a *lockActor) releasedTo(ctx actor.Context, s *releaseStep, d *stepDone) {
	next := s.next
	switch {
	case s.handed.Acquired && next.answered:
		a.undo(next.owner, next.write(), s.handed.HoldCount)
		a.headReady = true
	case s.handed.Acquired && a.env.unsynced(s.acked):
		a.unconfirmed(ctx, next, s.handed, s.acked)
	case s.handed.Acquired:
		a.env.Observe.handoff(a.key, s.owner, next.owner, true)
		a.handoffs++
		a.granted(ctx, next, s.handed, d.sentAt)
	default:
		a.fam.releasedPublicly(a, s.unlock.Heard)
	}
}

// stillHeld accounts for a release after which Redis still counts holds (of
// the owner, or for the read-write lock of anyone), and returns the owner's
// remaining count. Holds without a grant here belong to someone else acting
// as the same owner (say the Redisson thread whose id a handle borrowed):
// this runtime no longer holds the lock, so it neither renews it nor keeps
// its waiters from contending.
func (a *lockActor) stillHeld(ctx actor.Context, h *hold, s *releaseStep) int64 {
	if h == nil {
		return 0
	}
	if a.fam.unheld(h, s.holds, s.write) {
		a.headReady = true
	}
	a.syncRenewal(h)
	if len(h.grants) == 0 {
		a.dropHold(ctx, h)
		a.headReady = true
		return 0
	}
	return h.counted(s.write)
}

// releasedLost: the owner held nothing when its unlock ran (it expired or was
// taken first), so the release fails and the hold is lost.
func (a *lockActor) releasedLost(ctx actor.Context, s *releaseStep, h *hold) {
	const reason = "the lock expired or was taken before it was unlocked"
	if h != nil {
		a.lost(ctx, h, LossGone, reason)
	}
	a.endGrant(s.grant, lossOf(LossGone, reason))
	s.answer(ReleaseResult{Err: errors.Join(lostError(reason), ErrNotOwner)})
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
	if heard > 0 && a.queue.waiting() > 0 {
		a.yieldUntil = since() + yieldWindow
		a.armRetry(yieldWindow)
	}
}

// yieldWindow: long enough for a process woken by the unlock message to
// send its attempt, short enough to cost little if none does.
const yieldWindow = 2 * time.Millisecond

// releaseFailed: Redis did not answer, so the hold may still be there. The
// grant goes back into the hold, so Done() keeps its meaning and a retried
// Unlock (same request id, de-duplicated by the latch) can finish the job.
func (a *lockActor) releaseFailed(s *releaseStep, h *hold, err error) {
	if s.grant != nil && h != nil {
		// A copy: pointing into s would keep the finished step (its reply,
		// span and hand-off target) alive as long as the grant.
		basis := s.basis
		s.grant.unlocking = &basis
		h.grants = append(h.grants, s.grant)
		if s.grant.watchdog {
			h.watchdogs++
		}
		a.syncRenewal(h)
	}
	s.answer(ReleaseResult{Err: fmt.Errorf("actorlock: unlock %q: %w", a.key.Name, err)})
}

func (a *lockActor) forced(ctx actor.Context, s *forceStep, err error) {
	if err == nil && s.deleted {
		for h := range a.holds.all {
			if a.fam.forceEnds(h, s.write) {
				a.lost(ctx, h, LossGone, "the lock was force-unlocked")
			}
		}
		a.headReady = true
	}
	if err != nil {
		err = fmt.Errorf("actorlock: force unlock %q: %w", a.key.Name, err)
	}
	s.reply <- ForceUnlockResult{WasLocked: s.deleted, Err: err}
}
