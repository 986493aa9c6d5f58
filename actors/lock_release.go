package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/internal/sentinel"
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
	if h != nil && h.byMessage() {
		h = nil
	}
	g := h.find(func(g *grant) bool { return g.goID == m.ID })
	switch {
	case g == nil:
		reply(ReleaseResult{Err: lostError("the hold ended before this unlock")})
	case g.ended != nil:
		reply(endedRelease(g.ended)) // outlived: its holds are given back with the rest
	case g.release != nil && mutant.On(5):
		reply(ReleaseResult{Err: lostError("the hold ended before this unlock")})
	case g.release != nil:
		// A release of this acquisition is under way (an Unlock whose ctx
		// ended) or failed and is being tried again: this Unlock waits for
		// its outcome instead of starting another.
		g.release.join(reply)
	default:
		s := a.queueRelease(h, g, m.RequestID, reply)
		s.span = m.Span
	}
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
	// The unlock latch is per owner, so owners reusing request ids never
	// see each other's outcome.
	requestID := owner + ":" + m.RequestId
	h := a.holds.get(owner)
	if h != nil && !h.byMessage() {
		h = nil
	}
	if g := h.find(func(g *grant) bool { return g.release != nil && g.release.requestID == requestID }); g != nil {
		g.release.join(respond) // a retry of a release under way
		return
	}
	if h != nil {
		if res, ok := answered(h.by.released, requestID); ok {
			respond(res) // a retry of a release done: nothing more is released
			return
		}
	}
	// The answer, kept for this request id while the owner holds the lock.
	kept := func(res ReleaseResult) {
		if res.Err == nil && a.holds.get(owner) == h {
			remember(&h.by.released, requestID, res)
		}
		respond(res)
	}
	write := m.Kind == messages.Kind_KIND_WRITE
	var g *grant
	token := m.FencingToken
	if mutant.On(24) {
		token = 0
	}
	switch {
	case token < 0:
		respond(ReleaseResult{Err: fmt.Errorf("%w: fencing_token %d is negative", ErrInvalidArgument, token)})
		return
	case token > 0:
		// The acquisition the client names: the newest may be one whose
		// answer it never got (a re-entry it will send again).
		g = h.find(func(g *grant) bool { return g.token == token && g.write == write })
		switch {
		case g == nil:
			respond(ReleaseResult{Err: fmt.Errorf("%w: that owner_token holds no acquisition of lock %q (kind %v) with fencing_token %d here", ErrNotOwner, a.key.Name, m.Kind, token)})
			return
		case g.ended != nil:
			respond(endedRelease(g.ended))
			return
		case g.release != nil:
			g.release.join(kept) // released by another request meanwhile
			return
		}
	default:
		// The newest acquisition of that kind not being released.
		g = h.findNewest(func(g *grant) bool { return g.write == write && outlasts(g) })
		if g == nil {
			respond(ReleaseResult{Err: fmt.Errorf("%w: that owner_token holds nothing of lock %q (kind %v) here", ErrNotOwner, a.key.Name, m.Kind)})
			return
		}
	}
	a.queueRelease(h, g, requestID, kept)
}

// recent are the answers to an owner's newest requests by message of one
// kind (acquisitions, releases), so that a request sent again after its
// answer (the client lost it) gets the same answer instead of acquiring or
// releasing once more. A few suffice: a client retries the request it is
// waiting for. They live as long as the hold: once the owner holds
// nothing, a retried release is refused as not owned, and releases nothing
// either.
type recent[T any] struct {
	ids  [4]string
	res  [4]T
	next int
}

// remember keeps res as the answer to requestID: in place of an older
// answer to the same id (an id used again after its grant was released
// asked for a new one, whose answer a retry must get; a replay stores
// its answer again), else in the oldest slot.
func remember[T any](r **recent[T], requestID string, res T) {
	if *r == nil {
		*r = &recent[T]{}
	}
	v := *r
	for i, id := range v.ids {
		if id == requestID {
			v.res[i] = res
			return
		}
	}
	v.ids[v.next], v.res[v.next] = requestID, res
	v.next = (v.next + 1) % len(v.ids)
}

func answered[T any](r *recent[T], requestID string) (T, bool) {
	if r != nil {
		for i, id := range r.ids {
			if id == requestID {
				return r.res[i], true
			}
		}
	}
	var zero T
	return zero, false
}

// queueRelease queues the release in Redis of grant g of hold h; the
// watchdog stops renewing it now, so no renewal outlives the unlock.
func (a *lockActor) queueRelease(h *hold, g *grant, requestID string, reply func(ReleaseResult)) *releaseStep {
	if g.watchdog {
		h.watchdogs--
	}
	a.syncRenewal(h)
	s := &releaseStep{owner: h.owner, write: g.write, grant: g, holds: 1, requestID: requestID}
	s.join(reply)
	g.release = s
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
	case a.knows(owner, nil):
		respond(false, nil) // answered already
	default:
		respond(false, fmt.Errorf("%w: that owner_token holds or awaits nothing of lock %q here", ErrNotOwner, a.key.Name))
	}
}

// ---- outcomes ----------------------------------------------------------------

func (a *lockActor) released(ctx actor.Context, s *releaseStep, d *stepDone) {
	h := a.holds.get(s.owner)
	if h != nil {
		h.releasing = [2]int64{} // its outcome is known now
	}
	s.out = false
	if d.err != nil {
		if unsettled(d.err) {
			a.releaseUnknown(ctx, s, h, d.err)
		} else {
			a.releaseFailed(s, h, d.err)
		}
		if s.next != nil && unsettled(d.err) {
			// The waiter may hold it now without knowing: undo, then retry.
			a.giveBackUnknown(s.next.owner, s.next.write(), 1, s.next.leaseOr(a.env.Watchdog))
		}
		a.headReady = true
		return
	}
	if h == nil {
		// The hold was abandoned while this release ran (its validity
		// passed): what it released is no longer the give-back's to
		// release (giveBackHold).
		a.undone(s.owner, s.write, s.holds, s.unlock.State)
	}
	switch s.unlock.State {
	case scripts.Released:
		a.endGrant(s.grant, ErrUnlocked)
		if h != nil {
			// The owner holds nothing in Redis now: any other acquisition
			// of it here ended too (with its own release under way:
			// released; otherwise: lost).
			for _, g := range h.grants {
				if g.release != nil {
					a.endGrant(g, ErrUnlocked)
				} else {
					a.endGrant(g, lossOf(LossGone, "the owner's last hold in Redis was released by another of its acquisitions"))
				}
			}
			a.dropHold(ctx, h)
		}
		s.answer(ReleaseResult{Released: true})
		a.releasedTo(ctx, s, d)
	case scripts.StillHeld:
		h.take(func(g *grant) bool { return g == s.grant })
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
	if s.handed.Acquired {
		a.endIfGone(ctx, next, s.handed, -1)
	}
	switch {
	case s.handed.Acquired && next.answered:
		a.giveBack(next.owner, next.write(), 1, s.handed.HoldCount, s.handed.Mark, next.leaseOr(a.env.Watchdog))
		a.headReady = true
	case s.handed.Acquired && a.settlingFor(next.owner):
		// A give-back of next's owner began while the hand-off ran: the
		// two must not overlap (giveback.go).
		a.giveBackGrant(ctx, next, s.handed, "a give-back of its owner's holds was under way")
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
	if a.fam.unheld(h, s) {
		a.headReady = true
	}
	a.syncRenewal(h)
	a.armValidity() // a read release may have brought it forward
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
	s.answer(ReleaseResult{Err: sentinel.With(lostError(reason), ErrNotOwner)})
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

// releaseFailed: the release did not run (Redis refused it or could not be
// reached, or its attempts came too late and it was settled as not run),
// so the hold is still there. The grant stays in the hold, renewed again,
// so Done() keeps its meaning, and the actor runs the release again itself
// until it runs or the hold ends: the caller may have stopped waiting (its
// ctx ended), or be gone (a MultiLock round that failed), and a release
// asked for must complete. An Unlock called again meanwhile joins it.
// Each run is a request of its own (guardFor): the last one is known to
// have done nothing, so nothing can act twice.
func (a *lockActor) releaseFailed(s *releaseStep, h *hold, err error) {
	switch {
	case s.grant != nil && s.grant.ended != nil:
		// Its acquisition ended meanwhile (at its validity, say, which a
		// release refused as past it outlived): that is the answer to every
		// caller still waiting, an Unlock that joined it after it was told
		// a failure too (RT33-1), as a retry would give it (start).
		s.tell(endedRelease(s.grant.ended))
	case h != nil && s.grant != nil && errors.Is(err, scripts.ErrNotRun) && since() >= h.uncut():
		// Refused on arrival as past its hold's validity (releaseStep.call):
		// the hold may have expired in Redis; it is lost, and given back
		// by compare-and-release once its validity is looked at below.
		err = lostError("the hold's validity ended before its unlock reached Redis")
	}
	s.fail(a, err)
	if h != nil {
		// It did not run: the hold is valid as before it was sent.
		h.revalidate()
		a.armValidity()
	}
	if s.grant != nil && s.drained {
		// It did not run, and a release of every hold of its owner left its
		// holds to it: they are that one's to release now.
		a.drainMore(s)
	}
	if s.grant == nil && a.retryLater(s, s.giveUpAt) {
		// A release of every hold of a departed owner (Close's drain, an
		// owner actor that stopped): nobody else will release them; it is
		// run again while they are surely in Redis (giveUpAt).
		return
	}
	if s.grant == nil || h == nil || s.grant.ended != nil {
		s.answer(ReleaseResult{Err: sentinel.Op("unlock", a.key.Name, err)})
		return
	}
	if s.grant.watchdog {
		h.watchdogs++
	}
	a.syncRenewal(h)
	if mutant.On(4) {
		s.grant.release = nil // left for the caller to retry, if any
		return
	}
	s.retrying = true
	s.tries++
	a.runLater(min(50*time.Millisecond<<s.tries, time.Second), s)
}

// releaseUnknown: Redis did not answer the release, nor its settling, for
// as long as its guard is sure to live, so what it did can no longer be
// learnt: the owner may hold one hold more or less than known, or none.
// Its hold here ends as lost; nothing renews what Redis may still count,
// which then expires within its lease.
func (a *lockActor) releaseUnknown(ctx actor.Context, s *releaseStep, h *hold, err error) {
	s.answer(ReleaseResult{Err: sentinel.Op("unlock", a.key.Name, err)})
	const reason = "an unlock's outcome could not be learnt (Redis did not answer)"
	if h != nil {
		a.lost(ctx, h, LossRenewalFailed, reason)
	}
	a.endGrant(s.grant, lossOf(LossRenewalFailed, reason))
	a.voidUndos(s)
}

// voidUndos follows a release whose outcome will never be known (Redis did
// not answer, or the actor stopped before it did): its owner's give-backs
// on that side expect counts that include what it may or may not have
// released. A WithOwner id's count may come back to one of them by another
// runtime's re-entry, and the give-back would release that runtime's hold
// (RT39-1, RT40-1): its holds are left to expire within their lease, as a
// grant of unknown outcome's are (giveBackUnknown). An id the runtime made
// has no other holder: a count that no longer matches stays so, and
// refuses the give-back.
func (a *lockActor) voidUndos(s *releaseStep) {
	if a.ownID(s.owner) {
		return
	}
	for u := range a.undos {
		if u.owner == s.owner && u.write == s.write && !u.void {
			u.void = true
			a.env.Log.Warn("actorlock: lost holds are left to expire: an unlock of their owner id (WithOwner) had an unknown outcome, so what Redis still counts of them cannot be told",
				slog.String("lock", a.key.Name), slog.String("owner", s.owner), slog.Time("by", u.giveUpAt))
		}
	}
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
		err = sentinel.Op("force unlock", a.key.Name, err)
	}
	s.reply <- ForceUnlockResult{WasLocked: s.deleted, Err: err}
}
