package actors

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/messages"
)

// hold is what one owner holds of the lock here.
type hold struct {
	owner string
	// count is the owner's hold count in Redis as last seen (read-write
	// lock: its read holds; writes counts its write holds).
	count  int64
	writes int64
	// mark is what a give-back of the holds checks (scripts.Grant.Mark):
	// for a reentrant or fair lock, the mark Redis keeps with them (the
	// token of the grant that began them, which their re-entries keep); for
	// a write, the fencing token of the owner's newest grant, which the
	// counter holds until someone is granted the lock again.
	mark       int64
	grants     []*grant // acquisitions not yet released (a release under way included), oldest first
	watchdogs  int      // grants renewed by the watchdog
	gen        uint64   // renewal registration; 0: none
	renewReads int64    // read count the registration carries
	// valid is the hold's validity deadline, shared with the Helds of its
	// grants (Held.ValidUntil).
	valid Validity
	// earned is the validity deadline grants and renewals earned it (since
	// epoch), which valid may be cut below (readsOnlyUntil, releasing).
	earned time.Duration
	// releasing is how many reads and writes the release on its way takes
	// (a lock actor has one step in flight): until its outcome is known,
	// the hold is valid as if it had run (readsOnlyUntil).
	releasing [2]int64
	// reads (read-write lock) is how long each of the owner's read-hold
	// keys lives, key n at n-1 (since epoch, less drift): once the write
	// and the other reads are released, they alone keep the lock alive,
	// and a read release deletes the newest keys, whichever acquisition it
	// releases (Redisson's layout), so validity follows the keys left.
	reads []readKey
	// by is the owner actor of a hold acquired by message (its owner is a
	// token); nil for a Go caller's, which needs none of it.
	by *ownerActor
}

// readKey is one of an owner's read-hold keys: how long it lives (since
// epoch, less drift), and the fencing token of the grant that wrote it,
// which the key holds (a re-attempt tells by it whether an earlier attempt
// rewrote the key: rw_read_acquire.lua).
type readKey struct {
	until time.Duration
	token int64
	// sent is when the grant that wrote it was sent (since epoch): a
	// renewal sent before it found, if anything, the key this one
	// replaced under the same number.
	sent time.Duration
}

// ownerActor is the owning actor of a hold acquired by message. A remote
// owner's (lock_liveness.go) watchdog holds are kept only until
// aliveUntil, which its RenewRequests move on.
type ownerActor struct {
	from        *actor.PID // nil once released (releaseAll)
	remote      bool
	aliveUntil  time.Time
	suspect     bool // a Terminated came for from: aliveUntil applies even without watchdog grants
	unreachable bool // its node's connection broke: nothing more is sent to from
	// acquired and released answer retries of requests already answered
	// (lock_release.go, recent).
	acquired *recent[AcquireResult]
	released *recent[ReleaseResult]
}

type grant struct {
	goID     uint64 // the Acquire's ID, Go callers only
	token    int64
	watchdog bool
	write    bool                    // read-write lock: a write hold
	lease    time.Duration           // as granted
	end      context.CancelCauseFunc // Go callers: ends the Held's context
	// release is this grant's release under way: queued, in flight, or
	// failed and waiting to be tried again (releaseFailed); nil: none.
	// The grant stays in its hold meanwhile: the owner holds it until Redis
	// says otherwise.
	release *releaseStep
	ended   error // why it ended (unlocked, lost, closed); nil while it lasts
}

// find is the first grant of h that matches, nil if none (or h is nil).
func (h *hold) find(match func(*grant) bool) *grant {
	if h == nil {
		return nil
	}
	for _, g := range h.grants {
		if match(g) {
			return g
		}
	}
	return nil
}

// take removes and returns the first grant of h that matches, nil if none
// (or h is nil).
func (h *hold) take(match func(*grant) bool) *grant {
	if h == nil {
		return nil
	}
	for i, g := range h.grants {
		if match(g) {
			h.grants = append(h.grants[:i], h.grants[i+1:]...)
			return g
		}
	}
	return nil
}

// findNewest is find, searching from the newest grant.
func (h *hold) findNewest(match func(*grant) bool) *grant {
	if h == nil {
		return nil
	}
	for i := len(h.grants) - 1; i >= 0; i-- {
		if g := h.grants[i]; match(g) {
			return g
		}
	}
	return nil
}

// counted is the count of the holds r's kind adds to.
func (h *hold) counted(write bool) int64 {
	if write {
		return h.writes
	}
	return h.count
}

// granted is how many grants of h are on that side (a read-write lock's
// write side, else its reads or the only side).
func (h *hold) granted(write bool) int64 {
	var n int64
	for _, g := range h.grants {
		if g.write == write {
			n++
		}
	}
	return n
}

// byMessage reports whether h was acquired by message.
func (h *hold) byMessage() bool { return h.by != nil }

// from is the owner actor of h, nil for a Go caller's hold.
func (h *hold) from() *actor.PID {
	if h.by == nil {
		return nil
	}
	return h.by.from
}

func (h *hold) extend(until time.Time) {
	at := until.Sub(epoch)
	h.earned = max(h.earned, at)
	if at > h.validUntil() {
		h.valid.set(at)
	}
}

// revalidate sets h's validity from what grants and renewals earned it, or
// from its read-hold keys when only they keep the lock: after a release
// known not to have run, which had cut it as if it would (releasing).
func (h *hold) revalidate() { h.valid.set(h.uncut()) }

// uncut is h's validity were the release on its way (if any) not to run:
// how long the grants it releases stay valid until its outcome is known.
func (h *hold) uncut() time.Duration {
	cut := h.releasing
	h.releasing = [2]int64{}
	until, ok := readsOnlyUntil(h)
	h.releasing = cut
	if ok {
		return until
	}
	return h.earned
}

// deadline is when h's validity must be looked at again: its own, or, once
// only grants with an Unlock under way are left to it, their uncut one.
func (h *hold) deadline() time.Duration {
	if h.releasing != ([2]int64{}) && h.find(outlasts) == nil {
		return h.uncut()
	}
	return h.validUntil()
}

// outlasts reports whether g lives until the validity of its hold ends: it
// has not ended, and no Unlock of it is under way (whose outcome ends it).
func outlasts(g *grant) bool { return g.ended == nil && g.release == nil }

// validUntil is the hold's validity deadline, since epoch (timer.go).
func (h *hold) validUntil() time.Duration { return h.valid.at() }

// Validity is a hold's local validity deadline as the runtime holds it:
// before it, Redis cannot let another owner in (the deadline is when the
// last confirmed acquisition or renewal was sent, plus the lease, less
// Drift). The lock actor moves it (or the manager, for a dormant name);
// the Helds of the hold's grants read it. Kept since epoch (timer.go):
// 8 bytes per held name.
type Validity struct{ until atomic.Int64 }

func (v *Validity) at() time.Duration    { return time.Duration(v.until.Load()) }
func (v *Validity) set(at time.Duration) { v.until.Store(int64(at)) }

// Until is the deadline as a time; the zero time for a nil Validity.
func (v *Validity) Until() time.Time {
	if v == nil {
		return time.Time{}
	}
	return epoch.Add(v.at())
}

// localTTL is how long a local holder's hold stays valid, for a TryAcquire
// refused without asking Redis.
func (a *lockActor) localTTL() time.Duration {
	ttl := time.Duration(-1)
	for h := range a.holds.all {
		ttl = max(ttl, h.validUntil()-since(), 0)
	}
	return ttl
}

// syncRenewal keeps the watchdog registration of h in line with its grants
// (and, for a read-write lock, with its read count, whose keys it renews).
func (a *lockActor) syncRenewal(h *hold) {
	switch {
	case h.watchdogs > 0 && (h.gen == 0 || h.renewReads != h.count):
		if h.gen == 0 {
			h.gen = a.env.renewGens.Add(1)
		}
		h.renewReads = h.count
		a.env.System.Root.Send(a.env.renewal, &renewRegister{
			Name: a.key.Name, Kind: a.key.Kind, Owner: h.owner, Gen: h.gen, RW: a.fam.shares(), Reads: h.count,
		})
	case h.watchdogs == 0 && h.gen != 0:
		a.env.System.Root.Send(a.env.renewal, &renewCancel{Name: a.key.Name, Kind: a.key.Kind, Owner: h.owner, Gen: h.gen})
		h.gen = 0
	}
}

// dropHold forgets h: its owner no longer holds the lock.
func (a *lockActor) dropHold(ctx actor.Context, h *hold) {
	h.watchdogs = 0
	a.syncRenewal(h)
	a.holds.del(h.owner)
	a.watched.unwatch(ctx, h.from())
}

// lost ends every grant of h with ErrLost and tells an owner actor.
func (a *lockActor) lost(ctx actor.Context, h *hold, why LossReason, reason string) {
	err := lossOf(why, reason)
	var token int64
	// Acquisitions whose Unlock is under way too: their Done closes now, not
	// when their release gets through (it may be stuck behind a cut network).
	told := len(h.grants) > 0
	for _, g := range h.grants {
		told = told && g.ended != nil // by outlived
		a.endGrant(g, err)
		token = max(token, g.token)
	}
	if !told {
		a.tellLost(ctx, h, h.writes > 0, reason, token)
	}
	a.dropHold(ctx, h)
	a.headReady = true
}

// outlived: h's validity ran out under a release on its way, which cut it
// as if it had run, and before the validity the grants it releases had
// without it (uncut). The grants with no Unlock under way end as lost; the
// others wait for their release's outcome. The ended ones stay in h, so
// that what Redis counts of them is given back with the rest of the hold
// (giveBackHold) once the release's outcome is known and the hold's
// validity has run out again, as it has for them.
func (a *lockActor) outlived(ctx actor.Context, h *hold, why LossReason, reason string) {
	err := lossOf(why, reason)
	var token int64
	write := false
	for _, g := range h.grants {
		if !outlasts(g) {
			continue
		}
		a.endGrant(g, err)
		token, write = max(token, g.token), write || g.write
		if g.watchdog {
			h.watchdogs--
		}
	}
	if token == 0 {
		return
	}
	a.syncRenewal(h)
	a.tellLost(ctx, h, write, reason, token)
}

// tellLost pushes a LockLost to the owner actor of h, if it has one that
// can be reached: sending to a node whose connection broke would only make
// protoactor dial it again and again.
func (a *lockActor) tellLost(ctx actor.Context, h *hold, write bool, reason string, token int64) {
	if h.from() == nil || h.by.unreachable {
		return
	}
	kind := a.key.Kind
	if write {
		kind = messages.Kind_KIND_WRITE
	}
	// The owner asked by the name it knows, without the key prefix.
	ctx.Send(h.by.from, &messages.LockLost{Name: strings.TrimPrefix(a.key.Name, a.env.KeyPrefix), Kind: kind, Owner: h.owner, Reason: reason, FencingToken: token})
}

func (a *lockActor) endGrant(g *grant, cause error) {
	if g == nil {
		return
	}
	if g.ended == nil {
		g.ended = cause
	}
	if g.end != nil {
		g.end(cause)
	}
}

// releaseAll ends every grant of h and queues the release of all its holds.
func (a *lockActor) releaseAll(h *hold, cause error) {
	// Our grants only: an owner id given with WithOwner may be held through
	// other runtimes too, and Redis counts their holds with ours. But for a
	// release of ours on its way (in flight, or being settled), which
	// releases its own: should it turn out not to have run, its holds come
	// back to this release (drainMore); until then, and if its outcome
	// stays unknown, this one errs towards releasing less (a hold left over
	// expires within its lease; one released too many is another's).
	var reads, writes int64
	// These releases are unconditional (all of the owner's holds we
	// counted): they may run only while those are surely in Redis, before
	// their validity ends; past it they may have expired, and the owner id
	// (WithOwner) been taken afresh, whose hold a release would delete.
	until := epoch.Add(h.validUntil())
	// A release on its way has cut that validity to what it leaves (a
	// write's release leaves reads whose keys expire sooner): should it
	// turn out not to have run, the holds it left here stay as long as
	// they would have without it (drainMore).
	uncut := epoch.Add(max(h.validUntil(), h.uncut()))
	for _, g := range h.grants {
		// Ended now, whatever its release on its way does: nothing here
		// would end it at its validity any more, and its Done must close
		// before Redis can let another owner in (RT27-2).
		a.endGrant(g, cause)
		s := g.release
		if s != nil && s != a.inflight {
			// A release queued, being settled or waiting to be tried
			// again: the release of everything below replaces it.
			s.answer(ReleaseResult{Err: cause})
			s.replies = nil
		}
		switch {
		case s != nil && s.out:
			s.drained, s.giveUpAt = true, uncut
		case g.write:
			writes++
		default:
			reads++
		}
	}
	if mutant.On(14) {
		reads, writes = h.count, h.writes
	}
	for i, n := range [2]int64{reads, writes} {
		if n > 0 {
			a.steps = append(a.steps, &releaseStep{owner: h.owner, write: i == 1, holds: n, giveUpAt: until})
		}
	}
	h.grants, h.watchdogs = nil, 0
	if h.by != nil {
		h.by.from = nil
	}
	a.syncRenewal(h)
}

// drains yields owner's releases of every hold still to run or be
// settled: releaseAll's, and the releases on their way it left holds to
// (drained), which hand them to one if they did not run (RT27-1).
func (a *lockActor) drains(owner string) func(yield func(*releaseStep) bool) {
	return func(yield func(*releaseStep) bool) {
		for x := range a.pending {
			if r, ok := x.(*releaseStep); ok && (r.grant == nil || r.drained) && r.owner == owner && !yield(r) {
				return
			}
		}
	}
}

// keepDrains has owner's releases of every hold run until at least
// giveUpAt, those whose holds were surely in Redis at proof (their giveUpAt
// is later): what proves the holds last that long happened by then (zero:
// known without a time).
func (a *lockActor) keepDrains(owner string, proof, giveUpAt time.Time) {
	for r := range a.drains(owner) {
		if proof.Before(r.giveUpAt) && giveUpAt.After(r.giveUpAt) {
			r.giveUpAt = giveUpAt
		}
	}
}

// drainMore gives a release of every hold of s's owner (releaseAll) the
// holds of s, which it left to s, now that s turned out not to have run:
// the one still to be sent, or a new one.
func (a *lockActor) drainMore(s *releaseStep) {
	// s did not run: what it would have released keeps the owner's holds
	// in Redis as long as before it (releaseAll's uncut), those of the
	// other side too (a read under a write lives as long as the write).
	a.keepDrains(s.owner, time.Time{}, s.giveUpAt)
	for r := range a.drains(s.owner) {
		if r.grant == nil && r.write == s.write && !r.out {
			// Not sent yet (queued, or waiting to be tried again): it
			// releases these too.
			r.holds += s.holds
			return
		}
	}
	a.steps = append(a.steps, &releaseStep{owner: s.owner, write: s.write, holds: s.holds, giveUpAt: s.giveUpAt})
}

// expireHolds reports as lost every hold whose validity ran out: the watchdog
// could not renew it in time (or it had a fixed lease that is over).
func (a *lockActor) expireHolds(ctx actor.Context) {
	now := since()
	for h := range a.holds.all {
		if now < h.validUntil() {
			continue
		}
		why, reason := LossLocalDeadline, "the lease expired"
		if h.watchdogs > 0 {
			why, reason = LossRenewalFailed, "the lease expired before the watchdog could renew it"
		}
		if h.releasing != ([2]int64{}) && now < h.uncut() && !mutant.On(23) {
			a.outlived(ctx, h, why, reason)
			continue
		}
		a.abandonHold(ctx, h, why, reason)
	}
	a.armValidity()
}

// armValidity keeps the actor's entry in the runtime's wakeups at the
// earliest validity deadline of all holds, moved with every renewal; if it
// fires early (the earliest hold went meanwhile), expireHolds re-arms it.
func (a *lockActor) armValidity() {
	earliest := a.holds.earliest()
	if earliest < 0 {
		a.env.wakeups.cancel(&a.validity)
		return
	}
	a.env.wakeups.set(&a.validity, a.self, earliest)
}

// earliest is the earliest validity deadline of the holds, -1 if none.
func (s *holdSet) earliest() time.Duration {
	earliest := time.Duration(-1)
	for h := range s.all {
		if earliest < 0 || h.deadline() < earliest {
			earliest = h.deadline()
		}
	}
	return earliest
}

// renewed applies a renewal of registration gen, sent at sentAt with the
// first reads read-hold keys of the owner, to the hold of owner, if that
// registration is still the hold's, and reports whether it did.
func renewed(env *runtimeEnv, holds *holdSet, owner string, gen uint64, sentAt time.Time, found int64) bool {
	h := holds.get(owner)
	if h == nil || h.gen != gen {
		return false
	}
	until := sentAt.Add(env.Watchdog - Drift(env.Watchdog))
	// The renewal extended the read-hold keys it carried and found
	// (rw_renew.lua), too: not those of reads granted since it was sent
	// (the registration re-made with them keeps its gen; a key number
	// released and written again since is another key), whose keys keep
	// their own lease, nor one that had expired.
	for i := range min(len(h.reads), renewMaskKeys) {
		if found&(1<<i) != 0 && h.reads[i].sent <= sentAt.Sub(epoch) {
			h.reads[i].until = max(h.reads[i].until, until.Sub(epoch))
		}
	}
	// Reads alone keep the lock: as long as their keys (keys past the mask
	// are not reported: then as before, as long as the renewal says).
	if left, ok := readsOnlyUntil(h); ok && len(h.reads) <= renewMaskKeys {
		h.earned = max(h.earned, until.Sub(epoch))
		h.valid.set(left)
		return true
	}
	h.extend(until)
	return true
}

// renewMaskKeys is how many of an owner's read-hold keys a renewal reports
// on (rw_renew.lua).
const renewMaskKeys = 50

// holdSet is the holds of a lock actor by owner. Nearly every held name has
// one owner: it is kept in one, without a map (a Go map with one entry takes
// ~250 bytes per held name); more holds the other owners (readers of a
// read-write lock, WithOwner ids), made on first use and dropped when empty.
type holdSet struct {
	one  *hold
	more map[string]*hold
}

func (s *holdSet) get(owner string) *hold {
	if s.one != nil && s.one.owner == owner {
		return s.one
	}
	return s.more[owner]
}

// put adds h, whose owner holds nothing here yet.
func (s *holdSet) put(h *hold) {
	if s.one == nil {
		s.one = h
		return
	}
	if s.more == nil {
		s.more = map[string]*hold{}
	}
	s.more[h.owner] = h
}

func (s *holdSet) del(owner string) {
	if s.one != nil && s.one.owner == owner {
		s.one = nil
		return
	}
	delete(s.more, owner)
	if len(s.more) == 0 {
		s.more = nil
	}
}

func (s *holdSet) len() int {
	n := len(s.more)
	if s.one != nil {
		n++
	}
	return n
}

// all yields every hold; the loop may delete the hold it is given.
func (s *holdSet) all(yield func(*hold) bool) {
	if h := s.one; h != nil && !yield(h) {
		return
	}
	for _, h := range s.more {
		if !yield(h) {
			return
		}
	}
}
