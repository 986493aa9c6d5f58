package actorlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/actors"
)

// Extend makes a hold acquired with LeaseTime last at least d from now (as
// redsync's Extend and redislock's Refresh): in Redis, and locally, where
// the hold counts as lost when the extended lease is over (Done, Context).
// It never shortens a lease. It applies to the owner's whole hold in Redis
// (one key for all its re-entries). It returns ErrInvalidArgument for d
// under 10 ms, for a hold the watchdog renews (no LeaseTime), and for read-write lock
// holds; an error wrapping ErrLost if the lock is gone (the hold then ends);
// ErrUnlocked after Unlock; ErrClosed after Close; ctx's error if it ends
// first (the extension may still take effect). Lease keeps reporting the
// lease first granted.
func (h *Held) Extend(ctx context.Context, d time.Duration) (err error) {
	defer failed("extend", h.Name(), &err)
	if !h.usable() {
		return errNilHandle("Held")
	}
	if d < actors.MinLease {
		return fmt.Errorf("%w: extension %v is under %v", ErrInvalidArgument, d, actors.MinLease)
	}
	h.mu.Lock()
	err = h.check(ctx)
	h.mu.Unlock()
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctxError(ctx)
	}
	rt := h.lock.rt
	reply := make(chan error, 1)
	rt.send(&actors.Extend{Key: h.lock.key, Owner: h.owner, ID: h.id, Lease: d, Reply: reply})
	select {
	case err := <-reply:
		return h.endedBy(err)
	case <-h.Done(): // also when no lock actor has the hold any more
		select {
		case err := <-reply:
			return h.endedBy(err)
		default:
			return h.Err()
		}
	case <-rt.done:
		return ErrClosed
	case <-ctx.Done():
		return ctxError(ctx)
	}
}

// endedBy is err, or, when the runtime no longer knew the hold because an
// Unlock of it (one whose ctx ended first) completed just before, how the
// hold ended: the runtime ends a hold before it serves a later message.
func (h *Held) endedBy(err error) error {
	if errors.Is(err, ErrLost) && errors.Is(h.Err(), ErrUnlocked) {
		return h.Err()
	}
	return err
}
