// Package ext lets packages of this module that the root must not import
// (it would link their dependencies into every program that locks) plug
// into a Runtime: package remoting starts protoactor remote through it.
package ext

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// Server is a network server run on a runtime's own actor system.
type Server struct {
	// Err is a configuration error, which New returns.
	Err error
	// Name is what the runtime's PID is registered under.
	Name string
	// Start runs before the runtime's actors (so that their PIDs carry the
	// node's address) and returns what stops the server; Close calls it
	// after the actors have stopped.
	Start func(sys *actor.ActorSystem) (stop func(ctx context.Context) error, err error)
}

// Option makes an actorlock.Option (returned as any: this package cannot
// name the type) of a Server. Package actorlock sets it at init.
var Option func(Server) any

// LocalAddress is protoactor's address of a PID of a system without remote
// (protoactor does not export it): such a PID never names a remote peer.
const LocalAddress = "nonhost"

// Actors configures a runtime's actor system, for package actorkit's
// WithActorSystem and WithName: the fields set apply.
type Actors struct {
	// Err is a configuration error, which New returns.
	Err    error
	System *actor.ActorSystem
	Name   string
}

// ActorsOption makes an actorlock.Option (as any) of an Actors. Package
// actorlock sets it at init.
var ActorsOption func(Actors) any

// Runtime is what an actorlock.Runtime is to actors, for package actorkit.
type Runtime struct {
	System  *actor.ActorSystem
	Manager *actor.PID // where requests of package messages go
	Named   *actor.PID // the runtime's PID under its name; nil without one
	ID      string
	Remote  bool // started with remoting.WithRemote
}

// RuntimeOf tells what rt, an *actorlock.Runtime passed as any, is to
// actors; false for a nil Runtime or one not made by New. Package
// actorlock sets it at init.
var RuntimeOf func(rt any) (Runtime, bool)
