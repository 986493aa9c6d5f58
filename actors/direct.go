package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/actorlock/actorlock/internal/mutant"
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

// retryGuarded runs call under g, re-attempted while its outcome is
// unknown, every attempt under the same g (mutant m: each under a guard of
// its own, as markers that attempts outlived were).
func retryGuarded(ctx context.Context, g scripts.Guard, m int, call func(context.Context, scripts.Guard) error) error {
	return retryUnknown(ctx, func(ctx context.Context, attempt int) error {
		if attempt > 0 && mutant.On(m) {
			g.ID = fmt.Sprintf("%s'%d", g.ID, attempt)
		}
		return call(ctx, g)
	})
}

// carryThrough runs call, which gives back what nobody will have (an item
// popped for a taker that has gone, permits taken for one), until it acts:
// each run under a guard of its own and the call timeout, settled when its
// outcome stays unknown, run again when it did not act (Redis refused it or
// could not be reached), backing off up to a second, for as long as the
// runtime runs: unlike a lock's hold, an item or a permit does not expire.
// Only a run that could not be settled, a refusal no retry can change
// (NOPERM, a wrong kind), or Close ends it unfinished: that error is
// returned.
func (e *runtimeEnv) carryThrough(call func(context.Context, scripts.Guard) error) error {
	backoff := 50 * time.Millisecond
	for {
		g, first := e.guard(e.NewRequestID()), time.Now()
		ctx, cancel := context.WithTimeout(e.callsCtx, e.CallTimeout)
		err := retryGuarded(ctx, g, 19, call)
		cancel()
		if unsettled(err) {
			err = e.settle(first, g, call)
		}
		if err == nil || unsettled(err) || !mayWorkLater(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-e.callsCtx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// mayWorkLater reports whether a call that did not act may act when run
// again: it ran out of time or could not reach Redis, or Redis could not
// run it for now (failover, a busy script, out of memory).
func mayWorkLater(err error) bool {
	return errors.Is(err, scripts.ErrNotRun) || !isReply(err) || refusedForNow(err) || busyOrFull(err)
}

// push appends value to list name, once for the request g guards.
func (e *runtimeEnv) push(ctx context.Context, name string, value []byte, g scripts.Guard) error {
	err := retryGuarded(ctx, g, 19, func(ctx context.Context, g scripts.Guard) error {
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
	return retryGuarded(ctx, g, 19, func(ctx context.Context, g scripts.Guard) error {
		return scripts.GiveBack(ctx, e.batched, name, v, g)
	})
}

// pop takes the head of list name, waiting up to wait for one (0: not at
// all), through a hold of its own (scripts.Pop): the item moves there
// first, and the hold is ended (Taken) at once, so that an item whose reply
// was lost goes back to the head of the list, and one a replay moved too
// goes back as well, instead of being lost. A blocking pop's hold is ended
// even when it came back empty: a replay may have hidden an item the
// first attempt moved. Only a process that dies
// between the two calls leaves the item in the hold
// (actorlock_request:{name}:<id>).
func (e *runtimeEnv) pop(ctx context.Context, name string, wait time.Duration) ([]byte, bool, error) {
	hold := e.NewRequestID()
	var (
		v   []byte
		ok  bool
		err error
	)
	if wait > 0 {
		v, ok, err = scripts.BlockingPop(ctx, e.Redis, name, hold, wait)
	} else {
		v, ok, err = scripts.Pop(ctx, e.batched, name, hold)
	}
	// After a blocking pop, always: go-redis replays one whose connection
	// broke, and a replay that found nothing hides the item the first
	// attempt moved. (A plain pop is never replayed: with no item and no
	// error, nothing moved.)
	if ok || wait > 0 && !mutant.On(20) || (err != nil && mayHaveRun(err) && !mutant.On(20)) {
		// Not bounded by ctx, which may have ended: the call timeout.
		tctx, cancel := e.directCtx(context.WithoutCancel(ctx))
		defer cancel()
		if terr := retryUnknown(tctx, func(ctx context.Context, _ int) error { return scripts.Taken(ctx, e.batched, name, hold, ok, v) }); terr != nil {
			e.Log.Error("actorlock: could not end a pop's hold: what it holds stays there", "queue", name, "hold", scripts.RequestKey(name, hold), "error", terr)
		}
	}
	return v, ok, err
}

// offerDelayed stores a delayed item, once for the request g guards.
// go-redis itself never replays it.
func (e *runtimeEnv) offerDelayed(ctx context.Context, args scripts.OfferArgs, g scripts.Guard) error {
	err := retryGuarded(ctx, g, 18, func(ctx context.Context, g scripts.Guard) error {
		return scripts.OfferDelayed(ctx, e.batched, args, g)
	})
	if err != nil {
		return sentinel.Op("offer", args.Name, err)
	}
	return nil
}

// releasePermits adds n permits back to semaphore name.
func (e *runtimeEnv) releasePermits(ctx context.Context, name string, n int64, g scripts.Guard) error {
	err := retryGuarded(ctx, g, 19, func(ctx context.Context, g scripts.Guard) error {
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
	err := retryGuarded(ctx, g, 19, func(ctx context.Context, g scripts.Guard) (err error) {
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
