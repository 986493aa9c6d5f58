package actors

import (
	"context"

	"github.com/actorlock/actorlock/scripts"
)

// fair is the fair lock (Redisson's RFairLock). Every local waiter joins
// the Redis queue on arrival, one script at a time, so the global order is
// the order of arrival across processes. An unlock tells only the head of
// that queue, on the head's own channel <lock channel>:<owner>.
//
// Subscriptions: this runtime's waiters of a name are in the Redis queue in
// the order they arrived here, so only the earliest of them can be the next
// head. Subscribing to that one waiter's channel (a plain SUBSCRIBE, moved
// to the next waiter when it is served or leaves) costs one subscription per
// name however many local waiters there are. A pattern subscription
// (PSUBSCRIBE <lock channel>:*) would too, but Redis matches every PUBLISH on
// the server against every pattern, so many contended names would slow all
// publishing; a message published while the subscription moves is caught by
// the re-check that each (re)subscription triggers.
type fair struct{}

func (fair) acquire(ctx context.Context, rdb scripts.Client, c attemptArgs) (scripts.Grant, error) {
	return scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: c.AcquireArgs, Wait: c.wait, Enqueue: c.enqueue})
}

func (fair) release(ctx context.Context, rdb scripts.Client, c releaseArgs) (scripts.Unlock, scripts.Grant, error) {
	fu, err := scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: c.UnlockArgs, Wait: c.wait, Next: c.next})
	return fu.Unlock, fu.Next, err
}

func (fair) force(ctx context.Context, rdb scripts.Client, name string, _ bool) (bool, error) {
	return scripts.ForceUnlockFair(ctx, rdb, name)
}

func (fair) blocked(holds *holdSet, r *request) bool { return heldByOther(holds, r) }

func (fair) upgrade(*hold, *request) bool { return false }

// handsTo: the earliest local waiter is offered the lock once it has a
// place in the Redis queue; the script grants it only if that place is the
// head, so the global order holds.
func (fair) handsTo(_ *lockActor, next *request) bool { return next.enqueued }

// wantTopic is the channel of the earliest local waiter once it has a
// place in the Redis queue, while no local owner holds the lock: a local
// holder's release hands the lock to that waiter directly when it is the
// head, so a lock passed around in one process never subscribes.
func (fair) wantTopic(a *lockActor) topic {
	if a.queue.waiting() == 0 || a.holds.len() > 0 {
		return ""
	}
	head := a.front()
	if !head.enqueued {
		return ""
	}
	return topic(scripts.FairChannel(a.key.Name, head.owner))
}

func (fair) queues() bool { return true }
func (fair) shares() bool { return false }

// releasedPublicly: the script told the head of the Redis queue; if that
// is one of ours, its channel message wakes it.
func (fair) releasedPublicly(*lockActor, int64) {}

func (fair) unheld(h *hold, n int64, _ bool) bool {
	h.count = max(h.count-n, 1)
	return false
}

func (fair) forceEnds(*hold, bool) bool { return true }

func (fair) allHolds(h *hold) (reads, writes int64) { return max(h.count, 1), 0 }
