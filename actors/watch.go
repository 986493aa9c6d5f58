package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

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

// termination is what a Terminated proves about a watched requester.
type termination int

const (
	// notWatched: not a requester of this actor, or a forgery naming a
	// local actor that lives: nothing to do.
	notWatched termination = iota
	// stoppedHere: an actor of this process that the process registry
	// confirms gone: nobody is left to hand anything to.
	stoppedHere
	// remoteEnded: an actor of another node. It stopped, or the
	// connection to its node broke (and may come back), or any peer
	// claims so: nothing can tell these apart, so it proves nothing.
	remoteEnded
)

// terminated is the one rule by which every actor judges a Terminated for
// a requester it watches. Any remote peer can send a Terminated naming any
// PID (the remoting filter only drops those naming this node's actors), so
// one is believed only for an actor of this process that the registry
// confirms gone: the requester is then forgotten. A remote requester stays
// known, but protoactor no longer watches it (ended): what it held or
// waited for must end only as the actor's own rule for such requesters
// says (a lock's remote owner keeps what it renews; a queue or semaphore
// waiter is answered, never dropped unanswered).
func (w watchers) terminated(sys *actor.ActorSystem, m *actor.Terminated) termination {
	k := pidKey(m.Who)
	ref := w[k]
	switch {
	case ref == nil:
		return notWatched
	case !isLocalPID(sys, m.Who):
		ref.ended = true
		return remoteEnded
	}
	if _, alive := sys.ProcessRegistry.GetLocal(m.Who.Id); alive {
		return notWatched // forged
	}
	delete(w, k)
	return stoppedHere
}

// isLocalPID reports whether pid is an actor of this process. A peer may
// claim a local PID as its sender; it then gets a local requester's rules.
func isLocalPID(sys *actor.ActorSystem, pid *actor.PID) bool {
	return pid.GetAddress() == sys.Address() || pid.GetAddress() == localAddress
}

// errWatchEnded answers the waits of a remote requester whose Terminated
// came: whether it stopped, lost its connection for a moment, or a peer
// forged it, an answer is safe (it hands out nothing) where dropping the
// wait unanswered would leave a live requester waiting for ever.
var errWatchEnded = fmt.Errorf("%w: the runtime's watch of the requesting actor ended (it stopped, its node's connection broke, or a peer said so): send the request again if it still waits", ErrCanceled)
