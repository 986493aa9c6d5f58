package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// idleness is a child's side of the idle handshake: while the child is idle
// a timer runs; when it fires (still idle, nothing routed since) the child
// reports to the primitives actor, which stops it unless more was routed.
type idleness struct {
	key      primitiveKey
	routed   uint64
	reported bool
	seq      uint64
	stop     scheduler.CancelFunc
}

type idleDue struct{ seq uint64 }

// note counts a message the primitives actor routed here.
func (i *idleness) note(msg any) {
	if isPrimitiveRouted(msg) {
		i.routed++
		i.reported = false
	}
}

// sync arms the idle timer exactly while idle.
func (i *idleness) sync(env *Env, timers *scheduler.TimerScheduler, self *actor.PID, idle bool) {
	idle = idle && !i.reported
	switch {
	case idle && i.stop == nil:
		i.seq++
		i.stop = timers.SendOnce(env.IdleAfter, self, &idleDue{seq: i.seq})
	case !idle && i.stop != nil:
		i.cancel()
	}
}

// fired handles the timer; idle is the child's state now.
func (i *idleness) fired(ctx actor.Context, m *idleDue, idle bool) {
	if m.seq != i.seq || i.stop == nil {
		return
	}
	i.stop = nil
	if idle && !i.reported {
		i.reported = true
		ctx.Send(ctx.Parent(), &childIdle{key: i.key, pid: ctx.Self(), routed: i.routed})
	}
}

func (i *idleness) cancel() {
	if i.stop != nil {
		i.stop()
		i.stop = nil
	}
}
