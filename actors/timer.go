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
//
// Every lock actor has two, so it is kept small: at is monotonic time
// since epoch rather than a time.Time.
type deadline struct {
	seq    uint64
	at     time.Duration // when it fires, since epoch; 0: not armed
	stop   scheduler.CancelFunc
	follow *follower // follow's timer, once used
}

// follower is the runtime timer follow resets at each move; when it fires
// it reads the sequence number of the latest arming from armed.
type follower struct {
	timer *time.Timer
	armed atomic.Uint64
}

// epoch is the origin of deadline.at.
var epoch = time.Now()

func since() time.Duration { return max(time.Since(epoch), 1) }

type timerFired struct {
	t   *deadline
	seq uint64
}

// set arms the timer to fire after d, replacing any arming.
func (t *deadline) set(s *scheduler.TimerScheduler, self *actor.PID, d time.Duration) {
	t.cancel()
	t.seq++
	t.at = since() + max(d, 0)
	t.stop = s.SendOnce(d, self, &timerFired{t: t, seq: t.seq})
}

// setEarliest arms the timer for at, unless it already fires no later.
func (t *deadline) setEarliest(s *scheduler.TimerScheduler, self *actor.PID, at time.Time) {
	if t.at != 0 && at.Sub(epoch) >= t.at {
		return
	}
	t.set(s, self, time.Until(at))
}

// moveTo arms the timer for at, earlier or later than before, for a
// deadline that keeps moving later (the validity of the holds, moved by
// every renewal): one runtime timer is reset at each move, so the timer
// fires only when due and a move allocates nothing. set would leave the
// old arming to fire early and cost a new timer per move: per held name
// and renewal, with 100k names held.
func (t *deadline) moveTo(root *actor.RootContext, self *actor.PID, at time.Time) {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	t.seq++
	t.at = max(at.Sub(epoch), 1)
	if t.follow == nil {
		f := &follower{}
		f.armed.Store(t.seq)
		f.timer = time.AfterFunc(time.Until(at), func() {
			root.Send(self, &timerFired{t: t, seq: f.armed.Load()})
		})
		t.follow = f
		return
	}
	t.follow.armed.Store(t.seq)
	t.follow.timer.Reset(time.Until(at))
}

// cancel disarms the timer.
func (t *deadline) cancel() {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	if t.follow != nil {
		t.follow.timer.Stop()
	}
	t.at = 0
}

// fired reports whether m is this timer's current firing, and disarms it.
// A firing of moveTo's timer that was under way when the timer moved reads
// the new sequence number but comes before the new time: it is stale too
// (the moved timer fires again when due).
func (t *deadline) fired(m *timerFired) bool {
	if m.t != t || m.seq != t.seq || t.at == 0 || (t.follow != nil && since() < t.at) {
		return false
	}
	t.stop, t.at = nil, 0
	return true
}
