package scripts

import "context"

type callObserverKey struct{}

// WithCallObserver returns ctx carrying f, which every script call made
// with it (or a context derived from it) reports its script's name to:
// how the runtime counts its Redis calls per script without wrapping the
// user's client.
func WithCallObserver(ctx context.Context, f func(script string)) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, callObserverKey{}, f)
}

func (s script) observe(ctx context.Context) {
	if f, _ := ctx.Value(callObserverKey{}).(func(string)); f != nil {
		f(s.name)
	}
}

// The scripts' names, as metrics report them: their .lua file's name.
func init() {
	lockExtend.name = "lock_extend"
	fairAcquire.name = "fair_acquire"
	fairUnlock.name = "fair_unlock"
	fairLeave.name = "fair_leave"
	fairRefresh.name = "fair_refresh"
	fairForceUnlock.name = "fair_force_unlock"
	latchTrySet.name = "latch_try_set"
	latchCountDown.name = "latch_count_down"
	latchDelete.name = "latch_delete"
	lockAcquire.name = "lock_acquire"
	lockUnlock.name = "lock_unlock"
	lockHandoff.name = "lock_handoff"
	lockForceUnlock.name = "lock_force_unlock"
	lockRenew.name = "lock_renew"
	queueOffer.name = "queue_offer"
	queueMove.name = "queue_move"
	queueDelayedPoll.name = "queue_delayed_poll"
	queueDelayedContains.name = "queue_delayed_contains"
	queueDelayedRemove.name = "queue_delayed_remove"
	queuePush.name = "queue_push"
	queueGiveBack.name = "queue_give_back"
	rwReadAcquire.name = "rw_read_acquire"
	rwWriteAcquire.name = "rw_write_acquire"
	rwReadUnlock.name = "rw_read_unlock"
	rwWriteUnlock.name = "rw_write_unlock"
	rwRenew.name = "rw_renew"
	rwForceUnlock.name = "rw_force_unlock"
	semaphoreAcquire.name = "semaphore_acquire"
	semaphoreAdd.name = "semaphore_add"
	semaphoreTrySet.name = "semaphore_try_set"
	semaphoreDrain.name = "semaphore_drain"
	semaphoreExpirableAcquire.name = "semaphore_expirable_acquire"
	semaphoreExpirableRelease.name = "semaphore_expirable_release"
	semaphoreExpirableAvailable.name = "semaphore_expirable_available"
	semaphoreExpirableUpdate.name = "semaphore_expirable_update"
}
