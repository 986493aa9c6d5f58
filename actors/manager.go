package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/actorlock/actorlock/messages"
)

// MaxOwnerBytes bounds the owner id of a Go handle (WithOwner).
const MaxOwnerBytes = 1 << 10

// drainAll asks every lock actor to release what it holds; done is closed
// when all have (or have stopped).
type drainAll struct{ done chan struct{} }

// manager routes requests by (kind, name) to a lock actor it spawns on
// demand, and stops lock actors that stay idle, so a process that touched
// many names and released them keeps no per-name state.
type manager struct {
	env      *Env
	current  any // the message being handled, its name mapped (see mapName)
	locks    children[LockKey]
	draining bool
	waiting  map[LockKey]bool // drain: lock actors not done yet
	drained  chan struct{}

	// lockProps spawns every lock actor, for the key in spawning: one Props
	// shared by all (a lock actor keeps its Props for life, ~240 bytes per
	// held name otherwise). The producer runs inside Spawn, and only there:
	// lock actors are never restarted (lockSupervision).
	lockProps *actor.Props
	spawning  LockKey
}

func newManager(env *Env) *manager {
	m := &manager{env: env, locks: newChildren[LockKey]()}
	// The default mailbox, not protoactor's lock-free one (~180 bytes less
	// per held name): a consumer that finds a message counted but not yet
	// linked in spins until its producer runs again, which on a loaded
	// machine stalls the caller whose goroutine runs the lock actor.
	m.lockProps = props(func() actor.Actor { return newLockActor(m.env, m.spawning) })
	return m
}

// lockProps: a lock actor that fails is stopped, never restarted: a fresh
// actor would know nothing of the holds and waiters of the one that failed,
// whose stop handler fails its waiters and releases its holds.
var lockSupervision = actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive {
	return actor.StopDirective
})

func (m *manager) Receive(ctx actor.Context) {
	m.current = ctx.Message()
	if pm, ok := m.current.(proto.Message); ok && isProtocol(pm) {
		if err := checkBounds(pm); err != nil {
			m.refuse(ctx, pm, err)
			return
		}
		m.current = mapName(pm, m.env.KeyPrefix)
	}
	switch msg := m.current.(type) {
	case routed:
		switch key := familyKey(msg.lockKey()); {
		case m.draining:
			refuseClosed(msg)
		case m.locks.get(key) == nil && !spawns(msg):
			refuseStale(msg)
		default:
			m.route(ctx, key)
		}
	case *messages.AcquireRequest:
		if err := validateAcquire(msg, ctx.Sender()); err != nil {
			m.respond(ctx, &messages.AcquireResponse{RequestId: msg.RequestId, Error: protoError(err)})
			return
		}
		m.routeAcquire(ctx, msg.Kind, msg.Name, func(err error) any {
			return &messages.AcquireResponse{RequestId: msg.RequestId, Error: protoError(err)}
		})
	case *messages.ReleaseRequest:
		//lint:ignore SA1019 the deprecated field is refused, not used
		if msg.Owner != "" {
			m.refuse(ctx, msg, ownerFieldError())
			return
		}
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "held")
	case *messages.RenewRequest:
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "held or awaited")
	case *messages.CancelRequest:
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "awaited")
	case *idleReport:
		// The lock actor has processed everything routed to it and is idle,
		// so stopping it loses nothing. If more was routed meanwhile, it
		// will process that and report again when idle.
		if pid := m.locks.idle(msg.key, msg.pid, msg.routed); pid != nil {
			ctx.Stop(pid)
		}
	case *actor.Terminated:
		if _, alive := m.env.System.ProcessRegistry.GetLocal(msg.Who.GetId()); alive {
			// Forged (any remote peer can send a Terminated naming our
			// actors): forgetting a live lock actor would let a second one
			// serve the same name.
			return
		}
		if k, ok := m.locks.terminated(msg.Who); ok {
			m.doneDraining(k)
		}
	case *drainAll:
		m.draining = true
		m.drained = msg.done
		m.waiting = map[LockKey]bool{}
		m.locks.each(func(c *child[LockKey]) {
			m.waiting[c.key] = true
			ctx.Send(c.pid, &drainLock{})
		})
		m.doneDraining(LockKey{})
	case *lockDrained:
		m.doneDraining(msg.key)
	case *statsQuery:
		msg.reply <- m.locks.len()
	default:
		// The runtime's PID takes every message of the protocol; those
		// that are not about locks belong to the services actor.
		if pm, ok := msg.(proto.Message); ok && m.env.services != nil &&
			pm.ProtoReflect().Descriptor().ParentFile().Package() == protocolPackage {
			m.forward(ctx, m.env.services)
		}
	}
}

// protocolPackage is the protobuf package of package messages.
var protocolPackage = (&messages.AcquireRequest{}).ProtoReflect().Descriptor().ParentFile().Package()

func isProtocol(m proto.Message) bool {
	return m.ProtoReflect().Descriptor().ParentFile().Package() == protocolPackage
}

// refuse answers request m with err, or drops it (logging why, never its
// content) when it is not a request this runtime answers or has no sender.
func (m *manager) refuse(ctx actor.Context, req proto.Message, err error) {
	resp := refusal(req, err)
	if resp == nil || ctx.Sender() == nil {
		m.env.Log.Warn("actorlock: dropped an invalid message",
			slog.String("type", string(req.ProtoReflect().Descriptor().FullName())), slog.Any("error", err))
		return
	}
	ctx.Respond(resp)
}

// routeOwned routes a request of an owner (release, renew, cancel) to the
// lock actor of its name, after checking what can be checked without it:
// the target, the request id and the owner token, which must be present
// (NOT_OWNER otherwise: only the owner may do this) and well-formed. With no
// lock actor for the name nobody owns anything of it here: it is refused
// without spawning one, so garbage from a peer costs no actor. what says
// what the owner would have to do with the lock ("held"...), for the error.
func (m *manager) routeOwned(ctx actor.Context, req proto.Message, kind messages.Kind, name, requestID, token, what string) {
	err := validateTarget(kind, name, ctx.Sender())
	switch {
	case err != nil:
	case requestID == "":
		err = requestIDError("", nil)
	case token == "":
		err = fmt.Errorf("%w: no owner_token (only the owner of lock %q may do this; its token came in the AcquireResponse)", ErrNotOwner, name)
	default:
		err = ValidateOwnerToken(token)
	}
	if err == nil && m.draining {
		err = ErrClosed
	}
	if err == nil && m.locks.get(familyKey(LockKey{Kind: kind, Name: name})) != nil {
		m.route(ctx, familyKey(LockKey{Kind: kind, Name: name}))
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: nothing of lock %q is %s here by that owner_token", ErrNotOwner, name, what)
	}
	m.refuse(ctx, req, err)
}

// ownerFieldError refuses the deprecated owner field: naming an owner id
// would let any peer act as any owner.
func ownerFieldError() error {
	return fmt.Errorf("%w: the owner field is no longer accepted; ownership is proven by owner_token", ErrInvalidArgument)
}

func (m *manager) route(ctx actor.Context, key LockKey) {
	c := m.locks.route(key, func() *actor.PID {
		m.spawning = key
		return ctx.Spawn(m.lockProps)
	})
	m.forward(ctx, c.pid)
}

// forward passes the message being handled on to pid, from its sender: as
// received, or as mapped by the key prefix.
func (m *manager) forward(ctx actor.Context, pid *actor.PID) {
	if m.current == ctx.Message() {
		ctx.Forward(pid)
		return
	}
	ctx.RequestWithCustomSender(pid, m.current, ctx.Sender())
}

// mapName puts prefix before the name of a protocol request (a copy: the
// sender may still hold the message), so that a name means the same lock,
// queue or semaphore as for the root package's handles. An empty name stays
// empty, to be refused as such.
func mapName(m proto.Message, prefix string) proto.Message {
	if prefix == "" {
		return m
	}
	fd := m.ProtoReflect().Descriptor().Fields().ByName("name")
	if fd == nil || fd.Kind() != protoreflect.StringKind || m.ProtoReflect().Get(fd).String() == "" {
		return m
	}
	c := proto.Clone(m)
	c.ProtoReflect().Set(fd, protoreflect.ValueOfString(prefix+c.ProtoReflect().Get(fd).String()))
	return c
}

// routeAcquire validates what an AcquireRequest names, then routes it,
// spawning the lock actor of its name if needed; refusal builds the answer
// when it cannot be routed.
func (m *manager) routeAcquire(ctx actor.Context, kind messages.Kind, name string, refusal func(error) any) {
	err := validateTarget(kind, name, ctx.Sender())
	if err == nil && m.draining {
		err = ErrClosed
	}
	if err == nil {
		m.route(ctx, familyKey(LockKey{Kind: kind, Name: name}))
		return
	}
	m.respond(ctx, refusal(err))
}

func (m *manager) respond(ctx actor.Context, resp any) {
	if ctx.Sender() == nil {
		m.env.Log.Warn("actorlock: dropped an invalid request without a sender to answer", slog.Any("response", resp))
		return
	}
	ctx.Respond(resp)
}

func (m *manager) doneDraining(k LockKey) {
	if m.waiting == nil {
		return
	}
	delete(m.waiting, k)
	if len(m.waiting) == 0 {
		close(m.drained)
		m.waiting = nil
	}
}

// spawns tells whether a Go command may start a lock actor: only an Acquire
// or ForceUnlock can; a Release or Cancel refers to an actor's state.
func spawns(msg routed) bool {
	switch msg.(type) {
	case *Acquire, *ForceUnlock:
		return true
	}
	return false
}

// refuseStale answers a Release for a name no lock actor serves (its hold
// ended and the actor went idle), and drops a Cancel (nothing pending).
func refuseStale(msg routed) {
	if c, ok := msg.(*Release); ok && c.Reply != nil {
		c.Reply <- ReleaseResult{Err: lostError("the hold ended before this unlock")}
	}
}

// requestIDError is err, or the error of a missing request id: the id of a
// release names its unlock latch in Redis.
func requestIDError(id string, err error) error {
	if id == "" {
		return fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	}
	return err
}

// refuseClosed answers a Go command that arrived while the runtime closes.
func refuseClosed(msg routed) {
	switch c := msg.(type) {
	case *Acquire:
		c.Reply <- AcquireResult{Err: ErrClosed}
	case *Release:
		if c.Reply != nil {
			c.Reply <- ReleaseResult{Err: ErrClosed}
		}
	case *ForceUnlock:
		c.Reply <- ForceUnlockResult{Err: ErrClosed}
	}
}

// validateTarget checks what every lock message names. Remote actors are
// validated exactly like Go callers.
func validateTarget(kind messages.Kind, name string, sender *actor.PID) error {
	if sender == nil {
		return fmt.Errorf("%w: no sender; send requests with Context.Request", ErrInvalidArgument)
	}
	switch kind {
	case messages.Kind_KIND_LOCK, messages.Kind_KIND_FAIR, messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
	default:
		return fmt.Errorf("%w: lock kind %v is not supported", ErrInvalidArgument, kind)
	}
	return ValidateName(name)
}

func validateAcquire(m *messages.AcquireRequest, sender *actor.PID) error {
	if err := validateTarget(m.Kind, m.Name, sender); err != nil {
		return err
	}
	switch {
	case m.RequestId == "":
		return fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	case m.WaitMs < 0:
		return fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.LeaseMs < 0:
		return fmt.Errorf("%w: negative lease_ms %d", ErrInvalidArgument, m.LeaseMs)
	case m.WaitIndefinitely && m.WaitMs != 0:
		return fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	//lint:ignore SA1019 the deprecated field is refused, not used
	case m.Owner != "":
		return ownerFieldError()
	case m.OwnerToken != "":
		return ValidateOwnerToken(m.OwnerToken)
	}
	return nil
}
