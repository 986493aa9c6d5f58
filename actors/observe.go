package actors

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Observer is how the actors report what only they see (hand-offs, renewal
// failures, queue lateness, script calls) to the root package's metrics and
// events. A nil field reports nothing; the zero Observer costs a nil check.
// Every func must return at once: they run inside actors' Receive and on
// the goroutines of Redis calls.
type Observer struct {
	// Handoff: a waiter of this runtime was granted the lock of key by a
	// release: local means a local holder's release handed it over in the
	// same script (the lock was never free); otherwise the waiter had met
	// another owner and got the lock after it was released through Redis.
	Handoff func(key LockKey, from, to string, local bool)
	// RenewalFailed: the watchdog could not renew owner's hold of name.
	RenewalFailed func(name, owner string, err error)
	// QueueLateness: the mover of delayed queue name moved items this late
	// after their due time (by the Redis server's clock).
	QueueLateness func(name string, late []time.Duration)
	// ScriptCall: a Lua script ran (or was sent) on behalf of the runtime.
	ScriptCall func(script string)
}

func (o *Observer) handoff(key LockKey, from, to string, local bool) {
	if o.Handoff != nil {
		o.Handoff(key, from, to, local)
	}
}

func (o *Observer) queueLateness(name string, late []time.Duration) {
	if o.QueueLateness != nil && len(late) > 0 {
		o.QueueLateness(name, late)
	}
}

// renewalFailed reports the holds of a batch whose renewal call failed,
// skipping those cancelled or re-registered meanwhile.
func (r *renewal) renewalFailed(batch []*renewEntry, err error) {
	if r.env.Observe.RenewalFailed == nil || err == nil {
		return
	}
	for _, e := range batch {
		if cur := r.entries[e.renewKey]; cur != nil && cur.gen == e.gen {
			r.env.Observe.RenewalFailed(e.name, e.owner, err)
		}
	}
}

// withSpan makes the Redis calls run for a caller children of the caller's
// span (a go-redis tracing hook starts its span from the command's ctx).
func withSpan(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// LossReason says why a hold was lost, for metrics and events.
type LossReason string

const (
	// LossGone: Redis no longer had the hold (deleted, expired, the
	// server restarted or failed over without it, force-unlocked).
	LossGone LossReason = "gone"
	// LossTaken: another owner held the lock in Redis.
	LossTaken LossReason = "taken"
	// LossRenewalFailed: the watchdog could not renew the hold within its
	// lease (Redis unreachable, failing or frozen).
	LossRenewalFailed LossReason = "renewal_failed"
	// LossLocalDeadline: a hold with a fixed lease (LeaseTime) reached
	// the end of its lease before it was unlocked.
	LossLocalDeadline LossReason = "local_deadline"
)

// lossError is ErrLost with its reason's category; its text is
// lostError's.
type lossError struct {
	why  LossReason
	text string
}

func (e *lossError) Error() string { return ErrLost.Error() + ": " + e.text }
func (e *lossError) Unwrap() error { return ErrLost }

func lossOf(why LossReason, text string) error { return &lossError{why: why, text: text} }

// LossReasonOf is the category of a loss error: LossGone for an ErrLost
// that carries none, "" for an error that is not ErrLost.
func LossReasonOf(err error) LossReason {
	var le *lossError
	switch {
	case errors.As(err, &le):
		return le.why
	case errors.Is(err, ErrLost):
		return LossGone
	}
	return ""
}
