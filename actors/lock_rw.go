package actors

import (
	"context"
	"time"

	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// readWrite is the read-write lock (Redisson's RReadWriteLock). One actor
// serves both sides of a name. Readers share the lock; a writer excludes
// everyone else. The write owner may also read (a downgrade: releasing the
// write leaves its read holds); a reader may not take the write side (an
// upgrade would wait for its own read forever), so that is refused rather
// than deadlocked. A release wakes the local waiters instead of handing
// the lock to one.
type readWrite struct{}

func (readWrite) acquire(ctx context.Context, rdb scripts.Client, c attemptArgs, g scripts.Guard) (scripts.Grant, error) {
	if c.write {
		return scripts.AcquireWrite(ctx, rdb, c.AcquireArgs, g)
	}
	return scripts.AcquireRead(ctx, rdb, c.AcquireArgs, g)
}

func (readWrite) release(ctx context.Context, rdb scripts.Client, c releaseArgs, g scripts.Guard) (u scripts.Unlock, _ scripts.Grant, err error) {
	if c.write {
		u, err = scripts.UnlockWrite(ctx, rdb, c.UnlockArgs, g)
	} else {
		u, err = scripts.UnlockRead(ctx, rdb, c.UnlockArgs, g)
	}
	return u, scripts.Grant{}, err
}

func (readWrite) force(ctx context.Context, rdb scripts.Client, name string, write bool) (bool, error) {
	return scripts.ForceUnlockRW(ctx, rdb, name, write)
}

// blocked: any write hold of another owner keeps a reader out; any hold
// of another owner, or the owner's own read holds (an upgrade), a writer.
func (readWrite) blocked(holds *holdSet, r *request) bool {
	for h := range holds.all {
		switch {
		case h.owner == r.owner:
			if r.write() && h.writes == 0 && h.count > 0 {
				return true
			}
		case r.write() || h.writes > 0:
			return true
		}
	}
	return false
}

// upgrade reports whether r asks for the write side that its owner (h)
// holds only for reading.
func (readWrite) upgrade(h *hold, r *request) bool {
	return r.write() && h != nil && h.writes == 0 && h.count > 0
}

func (readWrite) handsTo(*lockActor, *request) bool { return false }

func (readWrite) wantTopic(a *lockActor) topic {
	if !a.contended {
		return ""
	}
	return topic(scripts.RWChannel(a.key.Name))
}

func (readWrite) queues() bool { return false }
func (readWrite) shares() bool { return true }

func (readWrite) releasedPublicly(a *lockActor, heard int64) {
	a.handoffs = 0
	a.afterPublicRelease(heard)
}

// unheld: the side released loses its holds; after a write, local readers
// may share what it left.
func (readWrite) unheld(h *hold, s *releaseStep) bool {
	if s.write {
		h.writes = max(h.writes-s.holds, 0)
	} else {
		h.count = max(h.count-s.holds, 0)
		h.reads = h.reads[:min(int64(len(h.reads)), h.count)]
	}
	if until, ok := readsOnlyUntil(h); ok {
		h.valid.set(until)
	}
	return s.write
}

// readsOnlyUntil is how long h is valid when only its read-hold keys keep
// the lock (it has no write, or the release on its way takes the last):
// as long as their keys, whatever the lock's own expiry, the watchdog's
// renewals included, which renew the keys they find. A read release sets
// the lock's expiry to the longest read-hold key left (of any owner: ours
// are a lower bound), or deletes the lock when every key left has
// expired, and it deletes the owner's newest keys, whichever reads it
// releases: the keys of a release on its way do not count. After a write
// release (a downgrade) the expiry is still the write's, but once the read
// keys have expired another reader's release deletes the lock.
func readsOnlyUntil(h *hold) (until time.Duration, ok bool) {
	keys := h.reads[:max(int64(len(h.reads))-h.releasing[0], 0)]
	if h.writes > h.releasing[1] || len(keys) == 0 || mutant.On(9) {
		return 0, false
	}
	for _, k := range keys {
		until = max(until, k.until)
	}
	return until, true
}

// releasing: release s of h is on its way. Redis may run it long before
// its outcome is known here (its reply lost, its settling slow), and a
// release is carried through until it runs: from now on the hold is valid
// as if it had (released clears this once the outcome is known).
func releasing(h *hold, s *releaseStep) {
	h.releasing = [2]int64{}
	if s.write {
		h.releasing[1] = s.holds
	} else {
		h.releasing[0] = s.holds
	}
	if until, ok := readsOnlyUntil(h); ok && until < h.validUntil() {
		h.valid.set(until)
	}
}

// forceEnds: a forced write unlock ends the write hold, a forced read
// unlock the read holds.
func (readWrite) forceEnds(h *hold, write bool) bool { return (h.writes > 0) == write }

func upgradeError() error {
	return sentinel.With(ErrNotAcquired, ErrUpgrade)
}

// passMark is when a reader last tried before a writer ahead of it: the
// wake-ups so far, that writer, and how many attempts it had started.
type passMark struct {
	wakes  uint64
	writer *request
	tries  int
}

// pass: a reader does not wait behind a local writer that cannot go now
// (the lock is read-held, here or elsewhere). A reader gets the lock
// whenever no other owner writes, whether writers wait or not: that is
// Redisson's read lock, and what the read script grants any client, so a
// local reader is served as a remote one would be (and a writer can wait
// as long as readers keep overlapping, as with Redisson). The earliest
// reader behind the writer tries once per chance the writer gets (a
// wake-up, or an attempt of the writer), so a reader refused because
// another owner writes waits as the writer does.
func (readWrite) pass(a *lockActor, head *request) *request {
	if !head.write() || a.queue.marked == 0 {
		a.readerSeen = nil
		return nil // no reader waits; a reader at the head waits for what all readers wait for
	}
	r := a.firstReader()
	mark := passMark{wakes: a.wakes, writer: head, tries: head.tries}
	if r == nil || r.inflight || r.passed == mark || (readWrite{}).blocked(&a.holds, r) || a.settlingFor(r.owner) {
		return nil
	}
	r.passed = mark
	return r
}

// reads marks the requests the lock actor's queue counts: readers.
func reads(r *request) bool { return r.kind == messages.Kind_KIND_READ }

// firstReader is the earliest reader in the FIFO, found
// again only once the one found last has left it: readers join at the
// back, so it stays the earliest (but for a lost re-entry put back at the
// front, which then waits its turn), and waiting writers are not scanned
// at every message.
func (a *lockActor) firstReader() *request {
	if r := a.readerSeen; r != nil && r.elem != nil {
		return r
	}
	for e := a.queue.fifo.Front(); e != nil; e = e.Next() {
		if r := e.Value.(*request); reads(r) {
			a.readerSeen = r
			return r
		}
	}
	return nil
}
