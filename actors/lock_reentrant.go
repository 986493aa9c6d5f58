package actors

import (
	"context"

	"github.com/actorlock/actorlock/scripts"
)

// reentrant is the reentrant lock (Redisson's RLock): one owner at a time,
// re-entered by its owner, woken by one channel per name. A local holder's
// last release may hand the lock straight to the local head (HandoffLock),
// at most MaxHandoffs times in a row.
type reentrant struct{}

func (reentrant) acquire(ctx context.Context, rdb scripts.Client, c attemptArgs, g scripts.Guard) (scripts.Grant, error) {
	return scripts.AcquireLock(ctx, rdb, c.AcquireArgs, g)
}

func (reentrant) release(ctx context.Context, rdb scripts.Client, c releaseArgs, g scripts.Guard) (scripts.Unlock, scripts.Grant, error) {
	if c.next.Owner == "" {
		u, err := scripts.UnlockLock(ctx, rdb, c.UnlockArgs, g)
		return u, scripts.Grant{}, err
	}
	h, err := scripts.HandoffLock(ctx, rdb, scripts.HandoffArgs{Name: c.Name, From: c.Owner, To: c.next}, g)
	return scripts.Unlock{State: h.Released}, h.Next, err
}

func (reentrant) force(ctx context.Context, rdb scripts.Client, name string, _ bool) (bool, error) {
	return scripts.ForceUnlockLock(ctx, rdb, name)
}

func (reentrant) blocked(holds *holdSet, r *request) bool { return heldByOther(holds, r) }

func (reentrant) upgrade(*hold, *request) bool { return false }

// pass: nobody passes the head.
func (reentrant) pass(*lockActor, *request) *request { return nil }

// handsTo: the owner's last release goes straight to the head, MaxHandoffs
// times in a row at most, then publicly so that other processes get a turn.
func (reentrant) handsTo(a *lockActor, _ *request) bool { return int(a.handoffs) < a.env.MaxHandoffs }

func (reentrant) wantTopic(a *lockActor) topic {
	if !a.contended {
		return ""
	}
	return topic(scripts.LockChannel(a.key.Name))
}

func (reentrant) queues() bool { return false }
func (reentrant) shares() bool { return false }

func (reentrant) releasedPublicly(a *lockActor, heard int64) {
	a.handoffs = 0
	a.afterPublicRelease(heard)
}

// unheld: Redis still counts holds of the owner, at least one.
func (reentrant) unheld(h *hold, s *releaseStep) bool {
	h.count = max(h.count-s.holds, 1)
	return false
}

func (reentrant) forceEnds(*hold, bool) bool { return true }

// heldByOther reports whether an owner other than r's holds the lock here.
func heldByOther(holds *holdSet, r *request) bool {
	for h := range holds.all {
		if h.owner != r.owner {
			return true
		}
	}
	return false
}
