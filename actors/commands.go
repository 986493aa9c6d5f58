package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/messages"
)

// The Go-only messages package actorlock sends to the manager on behalf of
// Go callers. Replies travel on a channel buffered for exactly one reply, so
// an actor never blocks on a caller that has gone away.

// LockKey names what one lock actor serves.
type LockKey struct {
	Kind messages.Kind
	Name string
}

// routed marks the messages the manager routes to a lock actor.
type routed interface{ lockKey() LockKey }

// Acquire asks for one acquisition.
type Acquire struct {
	Key   LockKey
	Owner string
	ID    uint64        // unique per runtime; Cancel names it
	Lease time.Duration // 0: watchdog lease, renewed while held
	// Deadline ends the wait with ErrNotAcquired; zero waits until
	// cancelled. Measured on the monotonic clock.
	Deadline time.Time
	TryOnce  bool
	// End cancels the Held's context with a cause when the hold ends for any
	// reason other than the caller's own successful Unlock.
	End   context.CancelCauseFunc
	Reply chan<- AcquireResult
	// Span is the caller's span: the scripts run for it are its children.
	Span trace.SpanContext
}

// AcquireResult answers Acquire exactly once.
type AcquireResult struct {
	Token     int64
	HoldCount int64
	HolderTTL time.Duration // when not acquired: the holder's remaining lease
	Valid     *Validity     // when acquired: the hold's validity deadline
	Err       error
}

// Release releases the hold that Acquire ID granted.
type Release struct {
	Key   LockKey
	Owner string
	ID    uint64 // the Acquire's ID
	// RequestID names the release; a caller retrying a failed Unlock
	// reuses it. (Each run of a release in Redis has a guard of its own:
	// scripts.Guard.)
	RequestID string
	Reply     chan<- ReleaseResult // nil: nobody waits for the outcome
	Span      trace.SpanContext    // the caller's span, as Acquire.Span
}

// ReleaseResult answers Release.
type ReleaseResult struct {
	Released  bool // the lock became free
	HoldCount int64
	Err       error
}

// Cancel abandons Acquire ID; Acquire is then answered (with ErrCanceled,
// or with its grant if that came first).
type Cancel struct {
	Key LockKey
	ID  uint64
}

// ForceUnlock deletes the lock whoever holds it.
type ForceUnlock struct {
	Key   LockKey
	Reply chan<- ForceUnlockResult
}

// ForceUnlockResult answers ForceUnlock.
type ForceUnlockResult struct {
	WasLocked bool
	Err       error
}

func (m *Acquire) lockKey() LockKey     { return m.Key }
func (m *Release) lockKey() LockKey     { return m.Key }
func (m *Cancel) lockKey() LockKey      { return m.Key }
func (m *ForceUnlock) lockKey() LockKey { return m.Key }
