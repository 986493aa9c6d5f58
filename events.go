package actorlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// EventKind is what an Event reports.
type EventKind int

const (
	// EventAcquired: a lock was acquired (Token, Wait).
	EventAcquired EventKind = iota + 1
	// EventReleased: a hold ended by Unlock, or by Close (Err is then
	// ErrClosed) (Token, Held).
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

func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what WithEvents reports about a lock of this runtime. Fields
// that do not apply to the Kind are zero.
type Event struct {
	Kind     EventKind
	Time     time.Time // when it happened
	Name     string    // the lock's name
	LockKind string    // "lock", "fair", "read" or "write"; "" for EventRenewalFailed
	Owner    string    // the owner id (Held.Owner)
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

// eventBuffer is how many events may wait for the callback; more are
// dropped (and counted) rather than slow the runtime down.
const eventBuffer = 1024

// dispatcher hands events to the WithEvents callback on a goroutine of its
// own, so that the runtime never waits for the callback: emit never
// blocks, and drops an event when the buffer is full.
type dispatcher struct {
	fn      func(Event)
	ch      chan Event
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	dropped atomic.Uint64
}

func newDispatcher(fn func(Event)) *dispatcher {
	if fn == nil {
		return nil
	}
	d := &dispatcher{fn: fn, ch: make(chan Event, eventBuffer), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

func (d *dispatcher) emit(e Event) {
	if d == nil {
		return
	}
	if d.stopped.Load() {
		d.dropped.Add(1)
		return
	}
	e.Time = time.Now()
	select {
	case d.ch <- e:
	default:
		d.dropped.Add(1)
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		select {
		case e := <-d.ch:
			d.fn(e)
		case <-d.stop:
			// Deliver what was emitted before Close (the releases Close
			// made among them), then end.
			for {
				select {
				case e := <-d.ch:
					d.fn(e)
				default:
					return
				}
			}
		}
	}
}

// close stops the goroutine once it has delivered what is buffered, or
// when ctx ends (a callback that blocks is then left behind).
func (d *dispatcher) close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	if d.stopped.CompareAndSwap(false, true) {
		close(d.stop)
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the events callback is still running: %w", ctx.Err())
	}
}

// DroppedEvents is how many events were not delivered to the WithEvents
// callback because it fell behind (more than 1024 waiting) or the runtime
// was closed.
func (rt *Runtime) DroppedEvents() uint64 {
	if rt.tel.events == nil {
		return 0
	}
	return rt.tel.events.dropped.Load()
}
