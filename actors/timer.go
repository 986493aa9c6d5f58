package actors

import (
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
	if t.stop != nil && !at.Before(t.at) {
		return
	}
	t.set(s, self, time.Until(at))
}

// cancel disarms the timer.
func (t *deadline) cancel() {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	t.at = time.Time{}
}

// fired reports whether m is this timer's current firing, and disarms it.
func (t *deadline) fired(m *timerFired) bool {
	if m.t != t || m.seq != t.seq || t.stop == nil {
		return false
	}
	t.stop, t.at = nil, time.Time{}
	return true
}
