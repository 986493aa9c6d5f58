package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// idleness is a per-name child's side of the idle handshake, the same for
// the lock actors and the primitives actor's children: while the child is
// idle a timer runs; when it fires (still idle, nothing routed since) the
// child reports childIdle to its parent, which stops it unless more was
// routed meanwhile (children.stopIdle). A lock actor that only holds offers
// its holds instead (lockAsleep, dormant.go).
//
// A timer of its own, not protoactor's receive timeout: that one's timer
// goroutine writes the actor context's timeout while the actor reads it
// (a data race), and every message would put it off, a renewal included.
// routed is 32 bits and seq 8: the handshake only compares routed with the
// parent's count, which wraps the same way, and seq with the one arming
// that can still be pending.
//
// The timer is not stopped when the child gets busy, nor armed afresh each
// time it falls idle: a name locked and unlocked back to back would pay a
// timer start and stop per pair. Instead a firing checks how long the child
// has been idle, and arms again for the rest when it has not been idle for
// IdleAfter yet, so a busy child costs at most one timer per IdleAfter.
type idleness struct {
	routed   uint32 // messages the parent counted when forwarding them here
	seq      uint8
	armed    bool
	reported bool
	stopped  bool      // cancelled: the child is stopping, never armed again
	since    time.Time // when the child fell idle; zero while busy
	stop     scheduler.CancelFunc
}

type idleDue struct{ seq uint8 }

// childIdle is a child's report that it has processed everything routed to
// it and holds nothing: stopping it now loses nothing.
type childIdle[K comparable] struct {
	key    K
	pid    *actor.PID
	routed uint32
}

// note counts a message; counted tells whether the parent counted it when
// routing it here.
func (i *idleness) note(counted bool) {
	if counted {
		i.routed++
		i.reported = false
	}
}

// sync notes whether the child is idle (and not yet reported), and arms
// the timer when it is and none is running.
func (i *idleness) sync(ctx actor.Context, env *runtimeEnv, idle bool) {
	if !idle || i.reported || i.stopped {
		i.since = time.Time{}
		return
	}
	if i.since.IsZero() {
		i.since = time.Now()
	}
	if !i.armed {
		i.arm(ctx, env, env.IdleAfter)
	}
}

func (i *idleness) arm(ctx actor.Context, env *runtimeEnv, after time.Duration) {
	i.armed = true
	i.seq++
	i.stop = env.timers.SendOnce(after, ctx.Self(), &idleDue{seq: i.seq})
}

// cancel disarms the timer for good: the child is stopping. Handling the
// rest of Stopping leaves it idle, and a timer armed then would fire at the
// stopped actor, a dead letter.
func (i *idleness) cancel() {
	i.stopped = true
	if i.armed {
		i.armed = false
		i.stop()
		i.stop = nil
	}
}

// due reports whether m, the current arming's firing (a cancelled one may
// still arrive), finds the child idle for IdleAfter; if it is idle for
// less, the timer is armed again for the rest.
func (i *idleness) due(ctx actor.Context, env *runtimeEnv, m *idleDue) bool {
	if !i.armed || m.seq != i.seq {
		return false
	}
	i.armed, i.stop = false, nil
	if i.since.IsZero() {
		return false // busy: falling idle arms it again
	}
	if rest := env.IdleAfter - time.Since(i.since); rest > 0 {
		i.arm(ctx, env, rest)
		return false
	}
	return true
}

// timedOut follows a due firing: if the child is still idle it reports to
// its parent, keyed by key.
func timedOut[K comparable](i *idleness, ctx actor.Context, key K, idle bool) {
	if idle && !i.reported {
		i.reported = true
		ctx.Send(ctx.Parent(), &childIdle[K]{key: key, pid: ctx.Self(), routed: i.routed})
	}
}

// idleFired is a per-name child's whole handling of its timer's firing m:
// if it is due and the child (keyed by key) is still idle, the child
// reports to its parent. The lock actor, which may go dormant instead,
// calls due and timedOut itself.
func idleFired[K comparable](i *idleness, ctx actor.Context, env *runtimeEnv, m *idleDue, key K, idle bool) {
	if i.due(ctx, env, m) {
		timedOut(i, ctx, key, idle)
	}
}
