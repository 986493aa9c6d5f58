package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// idleness is a per-name child's side of the idle handshake, the same for
// the lock actors and the primitives actor's children: while the child is
// idle its receive timeout runs; when it fires (still idle, nothing routed
// since) the child reports childIdle to its parent, which stops it unless
// more was routed meanwhile (children.stopIdle).
//
// The receive timeout rather than a timer of its own: protoactor resets it
// at every message and it costs nothing until first armed, so a held name
// pays 8 bytes here. routed is 32 bits: the handshake only compares it with
// the parent's count, which wraps the same way.
type idleness struct {
	routed   uint32 // messages the parent counted when forwarding them here
	armed    bool
	reported bool
}

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

// sync arms the receive timeout exactly while idle and not yet reported.
func (i *idleness) sync(ctx actor.Context, env *Env, idle bool) {
	idle = idle && !i.reported
	switch {
	case idle && !i.armed:
		i.armed = true
		ctx.SetReceiveTimeout(env.IdleAfter)
	case !idle && i.armed:
		i.cancel(ctx)
	}
}

// cancel disarms the receive timeout.
func (i *idleness) cancel(ctx actor.Context) {
	if i.armed {
		i.armed = false
		ctx.CancelReceiveTimeout()
	}
}

// timedOut handles *actor.ReceiveTimeout (protoactor has disarmed it): if
// the child is still idle it reports to its parent, keyed by key.
func timedOut[K comparable](i *idleness, ctx actor.Context, key K, idle bool) {
	i.armed = false
	if idle && !i.reported {
		i.reported = true
		ctx.Send(ctx.Parent(), &childIdle[K]{key: key, pid: ctx.Self(), routed: i.routed})
	}
}
