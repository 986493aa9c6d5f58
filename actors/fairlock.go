package actors

import "github.com/actorlock/actorlock/scripts"

// Fair lock policy of lockActor (famFair). Every local waiter joins the
// Redis queue on arrival, one script at a time, so the global order is the
// order of arrival across processes. An unlock tells only the head of that
// queue, on the head's own channel <lock channel>:<owner>.
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

// fairTopic is the channel of the earliest local waiter once it has a place
// in the Redis queue, while no local owner holds the lock: a local holder's
// release hands the lock to that waiter directly when it is the head, so a
// lock passed around in one process never subscribes.
func (a *lockActor) fairTopic() Topic {
	if a.queue.Len() == 0 || len(a.holds) > 0 {
		return ""
	}
	head := a.queue.Front().Value.(*request)
	if !head.enqueued {
		return ""
	}
	return Topic(scripts.FairChannel(a.key.Name, head.owner))
}
