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
	return e.persist(func() error {
		g, first := e.guard(e.NewRequestID()), time.Now()
		ctx, cancel := context.WithTimeout(e.givingBack, e.CallTimeout)
		err := retryGuarded(ctx, g, 19, call)
		cancel()
		if unsettled(err) {
			err = e.settle(first, g, call)
		}
		return err
	}, func(err error) bool { return !unsettled(err) && mayWorkLater(err) })
}

// persist runs run until it succeeds or fails with an error again rejects,
// backing off from 50 ms up to a second between runs, for as long as the
// runtime runs, and while Close waits for it (givingBack; then it ends with
// the last run's error).
func (e *runtimeEnv) persist(run func() error, again func(error) bool) error {
	backoff := 50 * time.Millisecond
	for {
		err := run()
		if err == nil || !again(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-e.givingBack.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// mayWorkLater reports whether a call that did not act may act when run
// again: it ran out of time or could not reach Redis, or Redis could not
// run it for now (failover, a busy script, out of memory, a failed
// snapshot).
func mayWorkLater(err error) bool {
	return errors.Is(err, scripts.ErrNotRun) || !isReply(err) || refusedForNow(err) || refusedForAWhile(err)
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

// pop takes the head of list name, waiting up to wait for one (0: not at
// all), through a hold of its own (scripts.Pop): the item moves there
// first, and the hold is ended (Taken) at once, so that an item whose reply
// was lost goes back to the head of the list, and one a replay moved too
// goes back as well, instead of being lost. A blocking pop's hold is ended
// even when it came back empty: a replay may have hidden an item the
// first attempt moved. When an attempt of the pop may still reach Redis
// (a blocking pop, or one whose outcome is unknown), the ending leaves the
// hold marked as ended (scripts.Taken's late), so that the late attempt
// moves nothing. An ending that fails is carried through (endHold). Only
// a process that dies between the two calls, or an attempt that arrives
// after the mark expired, leaves an item in the hold
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
	unknown := err != nil && mayHaveRun(err)
	if ok || wait > 0 && !mutant.On(20) || (unknown && !mutant.On(20)) {
		// How long an attempt of the pop may still arrive: one held back on
		// its connection, or written after its caller gave up, as long as
		// an attempt of a guarded request may act (GuardTTL), then a
		// blocking one waits its timeout in Redis (BlockingPop's whole
		// seconds). A plain pop that was answered has no other attempt.
		var late time.Duration
		switch {
		case wait > 0:
			late = e.GuardTTL + max(wait, time.Second)
		case unknown:
			late = e.GuardTTL
		}
		e.endHold(ctx, name, hold, ok, v, late)
	}
	return v, ok, err
}

// endHold ends a pop's hold (scripts.Taken) before pop returns, bounded by
// the call timeout; if that fails, it goes on on a goroutine of its own,
// carried through as a give-back is (persist: Taken is safe to repeat),
// so that an item the hold keeps goes back to the queue once Redis can be
// reached again, until Close. Not a worker: a Go caller's Poll may run
// during Close.
func (e *runtimeEnv) endHold(ctx context.Context, name, hold string, took bool, v []byte, late time.Duration) {
	end := func(ctx context.Context) error {
		return retryUnknown(ctx, func(ctx context.Context, _ int) error {
			return scripts.Taken(ctx, e.batched, name, hold, took, v, late)
		})
	}
	// Not bounded by ctx, which may have ended: the call timeout (a Poll
	// whose Redis does not answer takes two, its pop's and this one: a
	// background ending may not outlive Close, and the item with it).
	tctx, cancel := e.directCtx(context.WithoutCancel(ctx))
	err := end(tctx)
	cancel()
	if err == nil {
		return
	}
	failed := func(err error) {
		e.Log.Error("actorlock: could not end a pop's hold: what it holds stays there", "queue", name, "hold", scripts.RequestKey(name, hold), "error", err)
	}
	if !mayWorkLater(err) {
		failed(err)
		return
	}
	go func() {
		err := e.persist(func() error {
			ctx, cancel := e.directCtx(e.givingBack)
			defer cancel()
			return end(ctx)
		}, mayWorkLater)
		if err != nil {
			failed(err)
		}
	}()
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

// newPermitIDs is n permit ids as Redisson makes them: 16 random bytes
// each, hex.
func newPermitIDs(n int64) []string {
	ids := make([]string, n)
	for i := range ids {
		var b [16]byte
		_, _ = rand.Read(b[:])
		ids[i] = hex.EncodeToString(b[:])
	}
	return ids
}
