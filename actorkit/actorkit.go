// Package actorkit is the actor side of an actorlock runtime: what an actor
// needs to lock by message instead of through the Go API. Most services
// never import it; it is for protoactor-go actors, local or in other
// processes, that acquire, release and renew locks with the requests of
// package messages, and for code that runs a runtime on an actor system of
// its own.
//
// An actor sends an AcquireRequest to PID(rt) with Context.Request (from
// another process: to NamedPID(rt), over protoactor remote, which package
// remoting starts and hardens); the lock then belongs to the owner token of
// its AcquireResponse, which every later request of that owner presents
// (TokenOwner tells the owner id Redis shows for it; NewOwnerToken draws
// one ahead of the request). An owner in another process keeps its locks
// alive with a keeper child (KeeperProps, Keep, Unkeep). docs/actors.md
// tells the whole protocol.
//
// The message protocol, the keeper's messages and this package follow the
// compatibility rules of the README's "Stability" section.
package actorkit

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/ext"
)

// DefaultRemoteName is the name a runtime started with remoting.WithRemote
// registers its PID under, unless remoting.Config.Name says otherwise:
// actors of other processes send to actor.NewPID(<node address>,
// DefaultRemoteName).
const DefaultRemoteName = "actorlock"

// PID is where actors send lock requests (package messages): AcquireRequest,
// ReleaseRequest, RenewRequest, CancelRequest, and the queue and semaphore
// requests. Send them with Context.Request so that the reply comes back to
// the requesting actor. A lock acquired by message belongs to the owner
// token of its AcquireResponse, which every later request of that owner
// presents. The runtime renews it while the actor that acquired it lives
// (an actor of another process proves that with RenewRequests: see
// KeeperProps) and releases it when it stops. Actors of other processes
// address the runtime by NamedPID. Nil for a nil runtime or one not made by
// actorlock.New.
func PID(rt *actorlock.Runtime) *actor.PID {
	r, ok := ext.RuntimeOf(rt)
	if !ok {
		return nil
	}
	return r.Manager
}

// NamedPID is the runtime's PID under its well-known name (remoting.Config's
// Name, or WithName), as actors of other processes address it:
// actor.NewPID(<node address>, name). Nil when it has no name.
func NamedPID(rt *actorlock.Runtime) *actor.PID {
	r, ok := ext.RuntimeOf(rt)
	if !ok {
		return nil
	}
	return r.Named
}

// System is the actor system the runtime runs on: its own, or the one
// given with WithActorSystem. Nil for a nil runtime or one not made by
// actorlock.New.
func System(rt *actorlock.Runtime) *actor.ActorSystem {
	r, ok := ext.RuntimeOf(rt)
	if !ok {
		return nil
	}
	return r.System
}

// RemoteAddress is the address actors of other processes reach the runtime
// at (host:port), or "" when it was not started with remoting.WithRemote.
func RemoteAddress(rt *actorlock.Runtime) string {
	r, ok := ext.RuntimeOf(rt)
	if !ok || !r.Remote {
		return ""
	}
	return r.System.Address()
}

// TokenOwner is the owner id (the lock hash's field in Redis) of the locks
// that the owner of token acquires by message from rt; the same as
// AcquireResponse.owner and LockLost.owner. It returns an error wrapping
// actorlock.ErrInvalidArgument for a malformed token or a nil runtime.
func TokenOwner(rt *actorlock.Runtime, token string) (string, error) {
	r, ok := ext.RuntimeOf(rt)
	if !ok {
		return "", fmt.Errorf("%w: nil runtime, or not made by actorlock.New", actorlock.ErrInvalidArgument)
	}
	return actors.OwnerOfToken(r.ID, token)
}

// NewOwnerToken draws an owner token (128 bits from crypto/rand, as 32 hex
// digits) for an AcquireRequest that names its own, so that the owner can
// cancel its first acquisition before the response brings the token: see
// AcquireRequest.owner_token.
func NewOwnerToken() string { return actors.NewOwnerToken() }

// WithActorSystem runs the runtime's actors on sys instead of a system of
// its own. The runtime never shuts sys down. Default: a new system whose
// logs go to the actorlock.WithLogger logger.
func WithActorSystem(sys *actor.ActorSystem) actorlock.Option {
	a := ext.Actors{System: sys}
	if sys == nil {
		a.Err = fmt.Errorf("%w: nil actor system", actorlock.ErrInvalidArgument)
	}
	return ext.ActorsOption(a).(actorlock.Option)
}

// WithName registers the runtime's PID under name in its actor system, so
// that actors of other processes can address it as actor.NewPID(<node
// address>, name) (see NamedPID). Use it when you run protoactor remote on
// your own system (WithActorSystem, and remoting.Options); remoting.WithRemote
// names the PID itself. Default: no name.
func WithName(name string) actorlock.Option {
	a := ext.Actors{Name: name}
	if name == "" {
		a.Err = fmt.Errorf("%w: empty PID name", actorlock.ErrInvalidArgument)
	}
	return ext.ActorsOption(a).(actorlock.Option)
}
