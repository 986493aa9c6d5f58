package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// The runtime's entry points for protocol requests are its PID (the
// manager) and its named PID (the gateway, which forwards to the manager).
// The manager checks every request's bounds, validates it, and maps its
// name with the key prefix (checkBounds, validate.go, mapName); the actors
// that own the state (the lock actors, the primitives actor and its
// children) trust that it did. Their PIDs are not secret (ids are
// sequential), and protoactor delivers to any PID a peer names, so these
// actors take a request only as entered, which only this package can make
// (a Go value: nothing on the wire decodes into it), and refuse one that
// comes any other way.

// entered is a protocol request passed on by the runtime's entry point,
// checked, validated and mapped. It travels with the requester as sender.
type entered struct{ msg proto.Message }

// passOn sends the protocol request msg to pid as entered, from sender.
func passOn(ctx actor.Context, pid *actor.PID, msg proto.Message, sender *actor.PID) {
	ctx.RequestWithCustomSender(pid, &entered{msg: msg}, sender)
}

// entryOnly wraps an actor behind the entry point: it hands the wrapped
// actor the requests that came as entered, as they were sent, and every
// other message as it is, except a protocol request, which it refuses.
type entryOnly struct {
	inner actor.Actor
	env   *runtimeEnv
}

func behindEntry(env *runtimeEnv, inner actor.Actor) actor.Actor {
	return &entryOnly{inner: inner, env: env}
}

func (e *entryOnly) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *entered:
		e.inner.Receive(enteredContext{Context: ctx, msg: m.msg})
	case proto.Message:
		if isProtocol(m) {
			refuse(ctx, e.env, m, errNotEntered)
			return
		}
		e.inner.Receive(ctx)
	default:
		e.inner.Receive(ctx)
	}
}

// enteredContext is the wrapped actor's context for an entered request: the
// request is its message; everything else (its sender, Respond, Forward of
// the entered request to a child) is the context's own.
type enteredContext struct {
	actor.Context
	msg proto.Message
}

func (c enteredContext) Message() any { return c.msg }

var errNotEntered = fmt.Errorf("%w: send requests to the runtime's PID (Runtime.PID, or its NamedPID from another process), not to an actor behind it", ErrInvalidArgument)
