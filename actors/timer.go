package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// deadline is a one-shot timer owned by an actor: when it fires it sends the
// actor a *timerFired naming it. A firing superseded by a later arming or by
// cancel (a stopped timer may still deliver) carries an old sequence number
// or finds the timer disarmed, and fired reports it as stale.
type deadline struct {
	seq  uint64
	at   time.Time // when it fires; zero: not armed
	stop scheduler.CancelFunc
	// follow's runtime timer, reset at every move; when it fires it reads
	// the sequence number of the latest arming from armed.
	timer *time.Timer
	armed atomic.Uint64
}

type timerFired struct {
	t   *deadline
	seq uint64
}

// set arms the timer to fire after d, replacing any arming.
func (t *deadline) set(s *scheduler.TimerScheduler, self *actor.PID, d time.Duration) {
	t.cancel()
	t.seq++
	t.at = time.Now().Add(d)
	t.stop = s.SendOnce(d, self, &timerFired{t: t, seq: t.seq})
}

// setEarliest arms the timer for at, unless it already fires no later.
func (t *deadline) setEarliest(s *scheduler.TimerScheduler, self *actor.PID, at time.Time) {
	if !t.at.IsZero() && !at.Before(t.at) {
		return
	}
	t.set(s, self, time.Until(at))
}

// follow arms the timer for at, earlier or later than before, for a
// deadline that keeps moving later (the validity of the holds, moved by
// every renewal): one runtime timer is reset at each move, so the timer
// fires only when due and a move allocates nothing. set would leave the
// old arming to fire early and cost a new timer per move: per held name
// and renewal, with 100k names held.
func (t *deadline) follow(root *actor.RootContext, self *actor.PID, at time.Time) {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	t.seq++
	t.at = at
	t.armed.Store(t.seq)
	if t.timer == nil {
		t.timer = time.AfterFunc(time.Until(at), func() {
			root.Send(self, &timerFired{t: t, seq: t.armed.Load()})
		})
		return
	}
	t.timer.Reset(time.Until(at))
}

// cancel disarms the timer.
func (t *deadline) cancel() {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.at = time.Time{}
}

// fired reports whether m is this timer's current firing, and disarms it.
// A firing of follow's timer that was under way when the timer moved reads
// the new sequence number but comes before the new time: it is stale too
// (the moved timer fires again when due).
func (t *deadline) fired(m *timerFired) bool {
	if m.t != t || m.seq != t.seq || t.at.IsZero() || (t.timer != nil && time.Now().Before(t.at)) {
		return false
	}
	t.stop, t.at = nil, time.Time{}
	return true
}
