package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// The direct Redis calls of the queues and semaphores that both an actor
// (answering a message, undoing what nobody took) and package actorlock
// (through Handle) make. Each runs under its request's duplicate guard
// (scripts.Guard: the same one for every attempt), so it acts once, and is
// re-attempted while its outcome is unknown; ctx bounds it.

// guard is the duplicate guard of request id, on any object of the runtime.
func (e *runtimeEnv) guard(id string) scripts.Guard {
	return scripts.Guard{ID: id, TTL: e.GuardTTL, Clock: e.Clock}
}

// push appends value to list name, once for the request g guards.
func (e *runtimeEnv) push(ctx context.Context, name string, value []byte, g scripts.Guard) error {
	err := retryUnknown(ctx, func(ctx context.Context, _ int) error {
		return scripts.Push(ctx, e.batched, name, value, g)
	})
	if err != nil {
		return sentinel.Op("offer", name, err)
	}
	return nil
}

// giveBack puts v back at the head of list name (an item popped for a
// taker that has gone), once for the request g guards.
func (e *runtimeEnv) giveBack(ctx context.Context, name string, v []byte, g scripts.Guard) error {
	return retryUnknown(ctx, func(ctx context.Context, _ int) error {
		return scripts.GiveBack(ctx, e.batched, name, v, g)
	})
}

// offerDelayed stores a delayed item, once for the request g guards.
// go-redis itself never replays it.
func (e *runtimeEnv) offerDelayed(ctx context.Context, args scripts.OfferArgs, g scripts.Guard) error {
	err := retryUnknown(ctx, func(ctx context.Context, _ int) error {
		return scripts.OfferDelayed(ctx, e.batched, args, g)
	})
	if err != nil {
		return sentinel.Op("offer", args.Name, err)
	}
	return nil
}

// releasePermits adds n permits back to semaphore name.
func (e *runtimeEnv) releasePermits(ctx context.Context, name string, n int64, g scripts.Guard) error {
	err := retryUnknown(ctx, func(ctx context.Context, _ int) error {
		_, err := scripts.AddPermits(ctx, e.batched, name, n, g)
		return err
	})
	if err != nil {
		return sentinel.Op("release", name, fmt.Errorf("%s: %w", count(n, "permit"), err))
	}
	return nil
}

// releasePermit releases permits ids of permit-expirable semaphore name:
// every one still recorded returns to the pool; ErrPermitExpired when any
// had run out of lease or was not held, ErrInvalidArgument for a malformed
// id (checked before anything is released).
func (e *runtimeEnv) releasePermit(ctx context.Context, name string, ids []string, g scripts.Guard) error {
	if err := validatePermitIDs(ids); err != nil {
		return err
	}
	var res scripts.PermitRelease
	err := retryUnknown(ctx, func(ctx context.Context, _ int) (err error) {
		res, err = scripts.ReleaseExpirablePermits(ctx, e.batched, name, ids, g)
		return err
	})
	switch {
	case err != nil:
		return sentinel.Op("release", name, fmt.Errorf("permits %q: %w", ids, err))
	case res.Expired+res.Unknown > 0:
		return sentinel.Op("release", name, fmt.Errorf("%w: permits %q: %d expired, %d not held, %d released in time",
			ErrPermitExpired, ids, res.Expired, res.Unknown, res.Released))
	}
	return nil
}

// count is n things, in the singular for one: "1 permit", "2 permits".
func count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.FormatInt(n, 10) + " " + thing + "s"
}

// randomID is 8 random bytes (a delayed item's id).
func randomID() [8]byte {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return b
}

// newPermitID is a permit id as Redisson makes them: 16 random bytes, hex.
func newPermitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
