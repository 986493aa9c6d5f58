package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/actorlock/actorlock/internal/sentinel"
	"github.com/actorlock/actorlock/messages"
)

// drainAll asks every lock actor to release what it holds; done is closed
// when all have (or have stopped).
type drainAll struct{ done chan<- struct{} }

// manager routes requests by (kind, name) to a lock actor it spawns on
// demand, and stops lock actors that stay idle, so a process that touched
// many names and released them keeps no per-name state.
type manager struct {
	env      *runtimeEnv
	current  any // the message being handled, its name mapped (see mapName)
	locks    children[LockKey]
	sleeping map[LockKey]*dormant // held names without a live actor (dormant.go)
	draining bool
	waiting  map[LockKey]bool // drain: lock actors not done yet
	drained  chan<- struct{}

	// lockProps spawns every lock actor, for the key in spawning: one Props
	// shared by all (a lock actor keeps its Props for life, ~240 bytes per
	// held name otherwise). The producer runs inside Spawn, and only there:
	// lock actors are never restarted (lockSupervision).
	lockProps *actor.Props
	spawning  LockKey
}

func newManager(env *runtimeEnv) *manager {
	m := &manager{env: env, locks: newChildren[LockKey](), sleeping: map[LockKey]*dormant{}}
	// The default mailbox, not protoactor's lock-free one (~180 bytes less
	// per held name): a consumer that finds a message counted but not yet
	// linked in spins until its producer runs again, which on a loaded
	// machine stalls the caller whose goroutine runs the lock actor.
	m.lockProps = props(func() actor.Actor {
		a := newLockActor(m.env, m.spawning)
		if rec := m.waking(m.spawning); rec != nil {
			a.restore(rec)
		}
		return behindEntry(m.env, a)
	})
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
			refuse(ctx, m.env, pm, err)
			return
		}
		m.current = mapName(pm, m.env.KeyPrefix)
	}
	switch msg := m.current.(type) {
	case routed:
		key := familyKey(msg.lockKey())
		rec := m.sleeping[key]
		switch {
		case m.draining:
			refuseClosed(msg)
		case m.locks.get(key) == nil && rec == nil && !spawns(msg):
			refuseStale(msg)
		default:
			m.route(ctx, key)
		}
	case *messages.AcquireRequest:
		m.onAcquire(ctx, msg)
	case *messages.ReleaseRequest:
		//lint:ignore SA1019 the deprecated field is refused, not used
		if msg.Owner != "" {
			refuse(ctx, m.env, msg, ownerFieldError())
			return
		}
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "held")
	case *messages.RenewRequest:
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "held or awaited")
	case *messages.CancelRequest:
		m.routeOwned(ctx, msg, msg.Kind, msg.Name, msg.RequestId, msg.OwnerToken, "awaited")
	case *childIdle[LockKey]:
		m.locks.stopIdle(ctx, msg.key, msg.pid, msg.routed)
	case *renewReport:
		m.renewReport(ctx, msg)
	case *lockAsleep:
		m.asleep(ctx, msg)
	case *wakeupDue:
		m.validityDue(ctx, msg)
	case *actor.Stopping, *actor.Restarting:
		m.dropDormant()
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
		if msg.Who.GetAddress() == ctx.Self().GetAddress() {
			// Who is the stopped child's own PID, which protoactor's set of
			// this actor's children may keep in a slot past its end; its
			// cached process would keep the whole dead actor (~1.3 KiB).
			dropProcessCache(msg.Who)
		}
	case *drainAll:
		m.draining = true
		m.drained = msg.done
		m.waiting = map[LockKey]bool{}
		m.wakeAll(ctx)
		m.locks.each(func(c *child[LockKey]) {
			m.waiting[c.key] = true
			ctx.Send(c.pid, &drainLock{})
		})
		m.doneDraining(LockKey{})
	case *lockDrained:
		m.doneDraining(msg.key)
	case *lockStats:
		msg.reply <- [2]int{m.locks.len() + len(m.sleeping), len(m.sleeping)}
	default:
		// The runtime's PID takes every message of the protocol; those
		// that are not about locks belong to the primitives actor.
		if pm, ok := msg.(proto.Message); ok && m.env.primitives != nil && isProtocol(pm) {
			m.forward(ctx, m.env.primitives)
		}
	}
}

// protocolPackage is the protobuf package of package messages.
var protocolPackage = (&messages.AcquireRequest{}).ProtoReflect().Descriptor().ParentFile().Package()

func isProtocol(m proto.Message) bool {
	return m.ProtoReflect().Descriptor().ParentFile().Package() == protocolPackage
}

// routeOwned routes a request of an owner (release, renew, cancel) to the
// lock actor of its name, once validated. With no lock actor for the name
// nobody owns anything of it here: it is refused without spawning one, so
// garbage from a peer costs no actor. what says what the owner would have
// to do with the lock ("held"...), for the error.
func (m *manager) routeOwned(ctx actor.Context, req proto.Message, kind messages.Kind, name, requestID, token, what string) {
	err := validateOwned(kind, name, requestID, token, ctx.Sender())
	if err == nil && m.draining {
		err = ErrClosed
	}
	key := familyKey(LockKey{Kind: kind, Name: name})
	if err == nil && (m.locks.get(key) != nil || m.sleeping[key] != nil) {
		m.route(ctx, key)
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: nothing of lock %s is %s here by that owner_token", ErrNotOwner, sentinel.Quote(name), what)
	}
	refuse(ctx, m.env, req, err)
}

func (m *manager) route(ctx actor.Context, key LockKey) {
	c := m.locks.route(key, func() *actor.PID { return m.spawn(ctx, key) })
	m.forward(ctx, c.pid)
}

// spawn starts the lock actor of key, with its dormant record if it has one.
func (m *manager) spawn(ctx actor.Context, key LockKey) *actor.PID {
	m.spawning = key
	return ctx.Spawn(m.lockProps)
}

// forward passes the message being handled on to pid, from its sender: a
// Go command as received; a protocol request, checked and mapped by the key
// prefix, as entered (entry.go).
func (m *manager) forward(ctx actor.Context, pid *actor.PID) {
	if pm, ok := m.current.(proto.Message); ok && isProtocol(pm) {
		passOn(ctx, pid, pm, ctx.Sender())
		return
	}
	ctx.Forward(pid)
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

// onAcquire validates an AcquireRequest, then routes it, spawning the lock
// actor of its name if needed.
func (m *manager) onAcquire(ctx actor.Context, msg *messages.AcquireRequest) {
	err := validateAcquire(msg, ctx.Sender())
	if err == nil && m.draining {
		err = ErrClosed
	}
	if err != nil {
		refuse(ctx, m.env, msg, err)
		return
	}
	m.route(ctx, familyKey(LockKey{Kind: msg.Kind, Name: msg.Name}))
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
