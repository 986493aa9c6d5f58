package actors

import (
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
type idleness struct {
	routed   uint32 // messages the parent counted when forwarding them here
	seq      uint8
	armed    bool
	reported bool
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

// sync arms the timer exactly while idle and not yet reported.
func (i *idleness) sync(ctx actor.Context, env *runtimeEnv, idle bool) {
	idle = idle && !i.reported
	switch {
	case idle && !i.armed:
		i.armed = true
		i.seq++
		i.stop = env.timers.SendOnce(env.IdleAfter, ctx.Self(), &idleDue{seq: i.seq})
	case !idle && i.armed:
		i.cancel()
	}
}

// cancel disarms the timer.
func (i *idleness) cancel() {
	if i.armed {
		i.armed = false
		i.stop()
		i.stop = nil
	}
}

// due reports whether m is the current arming's firing (a cancelled one
// may still arrive), and disarms it.
func (i *idleness) due(m *idleDue) bool {
	if !i.armed || m.seq != i.seq {
		return false
	}
	i.armed, i.stop = false, nil
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
