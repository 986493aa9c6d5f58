package observe

import (
	"fmt"
	"time"
)

// EventKind is what an Event reports.
type EventKind int

const (
	// EventAcquired: a lock was acquired (Token, Wait).
	EventAcquired EventKind = iota + 1
	// EventReleased: a hold ended by Unlock, or by Close (Err is then
	// actorlock.ErrClosed) (Token, Held).
	EventReleased
	// EventLost: a hold was lost before it was unlocked (Reason, Err: the
	// Held's Err, Token, Held).
	EventLost
	// EventRenewalFailed: the watchdog could not renew a hold (Err: the
	// Redis error). The hold is lost if that lasts for its lease.
	EventRenewalFailed
	// EventHandedOff: a release of this runtime handed the lock straight
	// to a waiter of this runtime, in one script (From: the releasing
	// owner; Owner: the new one).
	EventHandedOff
	// EventGaveUp: an Acquire with WaitTime did not get the lock in time
	// (Wait, Err).
	EventGaveUp
)

var eventNames = [...]string{"", "acquired", "released", "lost", "renewal_failed", "handed_off", "gave_up"}

// String is the kind's name in metrics and logs: "acquired", "released",
// "lost", "renewal_failed", "handed_off", "gave_up".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what actorlock.WithEvents reports about a lock of a runtime.
// Fields that do not apply to the Kind are zero.
type Event struct {
	Kind     EventKind
	Time     time.Time // when it happened
	Name     string    // the lock's name
	LockKind string    // "lock", "fair", "read" or "write"; "" for EventRenewalFailed
	Owner    string    // the owner id (actorlock.Held.Owner)
	From     string    // EventHandedOff: the owner that released
	Token    int64     // the hold's fencing token
	// Reason (EventLost): "gone" (deleted, expired, lost in a restart or
	// failover, force-unlocked), "taken" (another owner held it),
	// "renewal_failed" (the watchdog could not renew it within its lease)
	// or "local_deadline" (a LeaseTime lease ran out).
	Reason string
	Err    error
	Wait   time.Duration // EventAcquired, EventGaveUp: how long Acquire took
	Held   time.Duration // EventReleased, EventLost: how long it was held
}
