package actorlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/observe"
)

// Held lists this runtime's holds now: every Held neither unlocked nor
// lost yet (members of a MultiLock or RedLock each appear), oldest first.
// Holds acquired by message (actorkit.PID) are not listed. It reads local
// state only, no Redis: a hold listed may already be lost in Redis without
// the runtime knowing yet (see Held.Done). Nil for a nil Runtime.
func (rt *Runtime) Held() []observe.HeldLock {
	if !rt.valid() {
		return nil
	}
	return rt.tel.holds.list()
}

// heldList is the runtime's holds by acquisition id: their trackers, from
// which list builds each observe.HeldLock (one per entry would cost ~110
// bytes more per held lock).
type heldList struct {
	mu sync.Mutex
	m  map[uint64]*holdTrack
}

func (l *heldList) add(id uint64, k *holdTrack) {
	l.mu.Lock()
	l.m[id] = k
	l.mu.Unlock()
}

func (l *heldList) remove(id uint64) {
	l.mu.Lock()
	delete(l.m, id)
	l.mu.Unlock()
}

func (l *heldList) list() []observe.HeldLock {
	l.mu.Lock()
	out := make([]observe.HeldLock, 0, len(l.m))
	for _, k := range l.m {
		// k.h and k.since were set before k was added, and stay.
		h := k.h
		out = append(out, observe.HeldLock{Name: h.Name(), Kind: kindNames[k.kind], Owner: h.owner, Token: h.token, Since: k.since, Lease: h.lease})
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b observe.HeldLock) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
	})
	return out
}

// holdTrack follows one acquisition's hold: it wraps the cancel func of the
// Held's context, which the lock actor calls whatever ends the hold (an
// Unlock, a loss, Close), so that the hold's end is seen in one place. The
// end may come before Acquire has returned the Held (a loss right after
// the grant): then started reports both.
type holdTrack struct {
	t      *telemetry
	cancel context.CancelCauseFunc
	// endedAt is when the hold ended (unix ns; 0: not yet), stored before
	// the context ends, so that whoever sees Done closed sees it.
	endedAt atomic.Int64
	mu      sync.Mutex
	h       *Held
	kind    acqKind
	since   time.Time
	ended   bool
	cause   error
}

func (t *telemetry) track(cancel context.CancelCauseFunc) *holdTrack {
	return &holdTrack{t: t, cancel: cancel}
}

// end ends the Held's context first (Done must close at once), then
// accounts for the hold's end once.
func (k *holdTrack) end(cause error) {
	k.endedAt.CompareAndSwap(0, time.Now().UnixNano())
	k.cancel(cause)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	k.ended, k.cause = true, cause
	if k.h != nil {
		k.t.holdEnded(k, cause)
	}
}

// started accounts for the hold Acquire returns after waiting waited.
func (k *holdTrack) started(h *Held, kind acqKind, waited time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.h, k.kind, k.since = h, kind, time.Now()
	k.t.holdStarted(k, waited)
	if k.ended {
		k.t.holdEnded(k, k.cause)
	}
}

func (t *telemetry) holdStarted(k *holdTrack, waited time.Duration) {
	h := k.h
	t.holds.add(h.id, k)
	t.held.Add(context.Background(), 1, t.kindAdd[k.kind]...)
	t.events.emit(observe.Event{Kind: observe.EventAcquired, Name: h.Name(), LockKind: kindNames[k.kind], Owner: h.owner, Token: h.token, Wait: waited})
}

func (t *telemetry) holdEnded(k *holdTrack, cause error) {
	h := k.h
	held := time.Since(k.since)
	t.holds.remove(h.id)
	t.held.Add(context.Background(), -1, t.kindAdd[k.kind]...)
	t.holdDur.Record(context.Background(), held.Seconds(), t.kindRecord[k.kind]...)
	e := observe.Event{Kind: observe.EventReleased, Name: h.Name(), LockKind: kindNames[k.kind], Owner: h.owner, Token: h.token, Held: held}
	if why := lossReasonOf(cause); why >= 0 {
		t.lost.Add(context.Background(), 1, t.lostOpts[k.kind][why]...)
		e.Kind, e.Reason, e.Err = observe.EventLost, string(lossReasons[why]), cause
	} else if !errors.Is(cause, ErrUnlocked) {
		e.Err = cause // ErrClosed: Close released it
	}
	t.events.emit(e)
}

// lossReasonOf is the index in lossReasons of why cause lost a hold, or -1
// when it is not a loss.
func lossReasonOf(cause error) int {
	if !errors.Is(cause, ErrLost) {
		return -1
	}
	why := actors.LossReasonOf(cause)
	for i, r := range lossReasons {
		if r == why {
			return i
		}
	}
	return 0
}
