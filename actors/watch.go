package actors

import "github.com/asynkron/protoactor-go/actor"

// watchers watches requesting actors, refcounted, so that a child forgets
// the requests of an actor that stopped (and hands it nothing more). The
// map is made by the first watch: a lock actor that only Go callers use
// never pays for it.
type watchers map[string]*watchRef

type watchRef struct {
	pid  *actor.PID
	refs int
	// ended: a Terminated came for a remote pid, so protoactor no longer
	// watches it, but requests and holds of it still count (the lock
	// actor's remoteStopped).
	ended bool
}

func (w *watchers) watch(ctx actor.Context, pid *actor.PID) {
	if pid == nil {
		return
	}
	k := pidKey(pid)
	ref := (*w)[k]
	switch {
	case ref == nil:
		if *w == nil {
			*w = watchers{}
		}
		ref = &watchRef{pid: pid}
		(*w)[k] = ref
		ctx.Watch(pid)
	case ref.ended:
		ref.ended = false
		ctx.Watch(pid)
	}
	ref.refs++
}

func (w *watchers) unwatch(ctx actor.Context, pid *actor.PID) {
	if pid == nil {
		return
	}
	k := pidKey(pid)
	if ref := (*w)[k]; ref != nil {
		if ref.refs--; ref.refs <= 0 {
			delete(*w, k)
			if !ref.ended {
				ctx.Unwatch(pid)
			}
		}
	}
}

// stopped forgets who, an actor that stopped, and reports whether it was
// watched: if so, the child forgets its requests.
func (w *watchers) stopped(who *actor.PID) bool {
	k := pidKey(who)
	if _, ok := (*w)[k]; !ok {
		return false
	}
	delete(*w, k)
	return true
}
