package actors

import "github.com/asynkron/protoactor-go/actor"

// watchers watches requesting actors, refcounted, so that a child forgets
// the requests of an actor that stopped (and hands it nothing more).
type watchers map[string]*watchRef

func (w watchers) watch(ctx actor.Context, pid *actor.PID) {
	if pid == nil {
		return
	}
	k := pidKey(pid)
	ref := w[k]
	if ref == nil {
		ref = &watchRef{pid: pid}
		w[k] = ref
		ctx.Watch(pid)
	}
	ref.refs++
}

func (w watchers) unwatch(ctx actor.Context, pid *actor.PID) {
	if pid == nil {
		return
	}
	k := pidKey(pid)
	if ref := w[k]; ref != nil {
		if ref.refs--; ref.refs <= 0 {
			delete(w, k)
			ctx.Unwatch(pid)
		}
	}
}
