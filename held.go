package actorlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/actors"
)

// Held is one acquisition of a lock. Release it exactly once with Unlock.
// Watch Done (or use Context) to learn that the lock was lost: work done
// after that is no longer protected. A nil Held, or one Acquire did not
// return, holds nothing: Done is closed, Err and Unlock report
// ErrInvalidArgument, its other methods return zero values.
type Held struct {
	lock     *Lock
	owner    string
	id       uint64
	token    int64
	lease    time.Duration
	ctx      context.Context
	track    *holdTrack
	valid    *actors.Validity // the hold's validity deadline, as the runtime moves it
	unlockID string           // every Unlock attempt of this Held reuses it

	mu         sync.Mutex
	unlocked   bool
	unlockSent bool // an Unlock was sent before: its outcome may be in Redis
}

// usable reports whether h is a hold Acquire returned.
func (h *Held) usable() bool { return h != nil && h.lock != nil && h.ctx != nil }

// notHeld is the context of a nil or zero Held: ended, with the error that
// its Unlock returns as cause.
var notHeld = func() context.Context {
	ctx, end := context.WithCancelCause(context.Background())
	end(errNilHandle("Held"))
	return ctx
}()

// Name is the lock's name.
func (h *Held) Name() string {
	if !h.usable() {
		return ""
	}
	return h.lock.key.Name
}

// Owner is the owner id holding the lock (its field in the lock's Redis
// hash): "<runtime id>:<n>", new for each acquisition that is not a
// re-entry, or the handle's WithOwner id.
func (h *Held) Owner() string {
	if h == nil {
		return ""
	}
	return h.owner
}

// Token is this acquisition's fencing token: greater than every token
// issued before for the lock name, by any process, any lock kind of the
// name, or Redisson's RFencedLock, even after the counter was lost, expired,
// or rolled back by a restart or a failover, as long as the Redis server's
// clock does not step back. Pass it with every write to the guarded
// resource, which must reject a token lower than the highest it has seen:
// that stops a holder that lost the lock without knowing it. Values are
// large: a token is at least the server's clock in microseconds (about
// 1.8e15); compare tokens, never assume they start at 1 or are consecutive.
func (h *Held) Token() int64 {
	if h == nil {
		return 0
	}
	return h.token
}

// Lease is the lease granted: the watchdog lease (renewed while held) or the
// LeaseTime asked for.
func (h *Held) Lease() time.Duration {
	if h == nil {
		return 0
	}
	return h.lease
}

// ValidUntil is the time until which the runtime counts this hold as held:
// before it, Redis cannot have let another owner in, whatever the network
// or Redis did meanwhile (short of the faults docs/guarantees.md calls
// unsafe). The watchdog moves it on with each renewal; a LeaseTime hold's
// is its lease from when the acquisition was sent, less a drift allowance.
// Once the hold ends (unlocked, lost, closed) it is no later than that
// moment. Check it right before a side effect the lock protects, with the
// time the effect needs:
//
//	if time.Until(held.ValidUntil()) < writeTimeout { return errTooLate }
//
// It is a local deadline: a process paused past it (a long GC stop, a
// suspended VM) may still act after it, which only a fencing token (Token)
// passed to the guarded resource stops.
func (h *Held) ValidUntil() time.Time {
	if !h.usable() {
		return time.Time{} // holds nothing
	}
	until := h.valid.Until()
	if ended := h.track.endedAt.Load(); ended != 0 {
		if t := time.Unix(0, ended); t.Before(until) {
			return t
		}
	}
	return until
}

// Done is closed when the hold ends: after Unlock, or when the lock is lost
// (Err then wraps ErrLost) or the runtime closes (ErrClosed). It closes
// before Redis can let another owner in.
func (h *Held) Done() <-chan struct{} { return h.Context().Done() }

// Err is nil while held; then why the hold ended: ErrUnlocked, an error
// wrapping ErrLost, or ErrClosed.
func (h *Held) Err() error { return context.Cause(h.Context()) }

// Context is cancelled, with Err as its cause, when the hold ends. It carries
// the values of the context Acquire was called with. An acquisition of the
// same lock with this context (or one derived from it) re-enters this hold.
func (h *Held) Context() context.Context {
	if !h.usable() {
		return notHeld
	}
	return h.ctx
}

// Unlock releases this acquisition: the lock is free once its owner's last
// hold is released. It returns ErrUnlocked if already called successfully,
// an error wrapping ErrLost (and ErrNotOwner when Redis showed another owner)
// if the lock was lost first, ErrClosed after Close, or a wrapped Redis error.
// A release that failed, or whose ctx ended first (Unlock then returns ctx's
// error), still completes: the runtime retries it until Redis answers, and
// the owner's next acquisitions wait for it. Calling Unlock again waits for
// that release and returns its outcome; it cannot release twice.
func (h *Held) Unlock(ctx context.Context) (err error) {
	defer failed("unlock", h.Name(), &err)
	if !h.usable() {
		return errNilHandle("Held")
	}
	if ctx == nil {
		return h.check(ctx)
	}
	ctx, span := h.lock.rt.tel.startSpan(ctx, "actorlock.unlock", h.Name())
	defer span.end(&err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releasedEarlier() {
		return nil
	}
	if err := h.check(ctx); err != nil {
		return err
	}
	rt := h.lock.rt
	fresh := !h.unlockSent
	h.unlockSent = true
	res, err := ask(ctx, rt, rt.send, func(reply chan<- actors.ReleaseResult) any {
		return &actors.Release{Key: h.lock.key, Owner: h.owner, ID: h.id, RequestID: h.unlockID, Reply: reply, Span: trace.SpanContextFromContext(ctx)}
	}, nil, nil)
	if err == nil {
		err = res.Err
	}
	if err != nil && !fresh && errors.Is(err, ErrLost) && h.releasedEarlier() {
		// The earlier release completed just before this one reached the
		// runtime, which then no longer knew the hold.
		return nil
	}
	if err == nil {
		h.unlocked = true
	}
	return err
}

// releasedEarlier reports (h.mu held) whether an earlier Unlock that failed,
// or whose ctx ended, was completed by the runtime, which carries a release
// through until Redis answers: a later Unlock succeeds with it.
func (h *Held) releasedEarlier() bool {
	if h.unlocked || !h.unlockSent || !errors.Is(h.Err(), ErrUnlocked) {
		return false
	}
	h.unlocked = true
	return true
}

// check reports what makes a call of the hold impossible before anything
// is sent (h.mu held): a nil ctx, an Unlock already done, the hold ended
// (lost, or closed), the runtime closed.
func (h *Held) check(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if h.unlocked {
		return ErrUnlocked
	}
	if err := h.Err(); err != nil {
		if errors.Is(err, ErrUnlocked) {
			h.unlocked = true
		}
		return err
	}
	if h.lock.rt.closed.Load() {
		return ErrClosed
	}
	return nil
}
