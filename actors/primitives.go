package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock/messages"
)

// primitives is the parent of the actors of the protocol's non-lock objects:
// it routes Go commands and protobuf requests by (kind, name) to a child it
// spawns on demand (a delayed queue's mover, a blocking queue's or a
// semaphore's waiters, a latch's awaiters) and stops children that report
// idle, exactly as the lock manager does with lock actors. Requests that
// need no waiting (a plain offer, a release) run as a call of their own,
// answered from it.
type primitives struct {
	env      *runtimeEnv
	children children[primitiveKey]
}

func newPrimitives(env *runtimeEnv) *primitives {
	p := &primitives{env: env, children: newChildren[primitiveKey]()}
	p.children.class = func(k primitiveKey) int {
		if k.Kind == primDelayed {
			return 0
		}
		return 1
	}
	return p
}

// primitivesStats asks the primitives actor for its counts: movers, and the
// other children.
type primitivesStats struct{ reply chan<- [2]int }

func (p *primitives) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case primitiveRouted:
		if p.children.get(m.primitiveKey()) != nil || m.starts() {
			p.route(ctx, m.primitiveKey())
		}
	case *messages.OfferRequest:
		p.onOffer(ctx, m)
	case *messages.TakeRequest:
		p.routeChecked(ctx, m, primitiveKey{primQueue, m.Name}, validateTake(m, ctx.Sender()))
	case *messages.SemaphoreAcquireRequest:
		p.routeChecked(ctx, m, primitiveKey{semKind(m.Expirable), m.Name}, validateSemAcquire(m, ctx.Sender()))
	case *messages.SemaphoreReleaseRequest:
		p.onSemRelease(ctx, m)
	case *messages.CancelWaitRequest:
		// Nothing pending means nothing to cancel, and nobody to answer.
		if key := (primitiveKey{waitKind(m.Kind), m.Name}); p.children.get(key) != nil && ctx.Sender() != nil {
			p.route(ctx, key)
		}
	case *childIdle[primitiveKey]:
		p.children.stopIdle(ctx, m.key, m.pid, m.routed)
	case *actor.Terminated:
		p.children.terminated(m.Who)
	case *primitivesStats:
		m.reply <- p.children.counts
	}
}

func waitKind(k messages.WaitKind) primitiveKind {
	switch k {
	case messages.WaitKind_WAIT_KIND_TAKE:
		return primQueue
	case messages.WaitKind_WAIT_KIND_SEMAPHORE:
		return primSemaphore
	case messages.WaitKind_WAIT_KIND_EXPIRABLE_SEMAPHORE:
		return primExpirable
	}
	return 0
}

func (p *primitives) route(ctx actor.Context, key primitiveKey) {
	c := p.children.route(key, func() *actor.PID {
		return ctx.Spawn(props(func() actor.Actor { return behindEntry(p.env, p.newChild(key)) }))
	})
	ctx.Forward(c.pid)
}

func (p *primitives) newChild(key primitiveKey) actor.Actor {
	switch key.Kind {
	case primDelayed:
		return newMover(p.env, key)
	case primQueue:
		return newQueueActor(p.env, key)
	case primSemaphore, primExpirable:
		return newSemaphoreActor(p.env, key)
	default:
		return newLatchActor(p.env, key)
	}
}

// routeChecked routes request req if it is valid (err == nil), or refuses it.
func (p *primitives) routeChecked(ctx actor.Context, req proto.Message, key primitiveKey, err error) {
	if err != nil {
		refuse(ctx, p.env, req, err)
		return
	}
	p.route(ctx, key)
}

// onOffer: a delayed offer belongs to the queue's mover (which must run to
// deliver it); an immediate one is a push.
func (p *primitives) onOffer(ctx actor.Context, m *messages.OfferRequest) {
	if err := validateOffer(m, ctx.Sender()); err != nil {
		refuse(ctx, p.env, m, err)
		return
	}
	if m.DelayMs > 0 {
		p.route(ctx, primitiveKey{primDelayed, m.Name})
		return
	}
	env, from := p.env, ctx.Sender()
	g := env.guard(senderRequestID(env, from, m.RequestId))
	env.goCall(nil, func(ctx context.Context) any {
		err := env.push(ctx, m.Name, m.Payload, g)
		env.System.Root.Send(from, &messages.OfferResponse{RequestId: m.RequestId, Error: primitiveError(err)})
		return nil
	})
}

// onSemRelease runs a semaphore release as a call of its own: nothing waits.
func (p *primitives) onSemRelease(ctx actor.Context, m *messages.SemaphoreReleaseRequest) {
	if err := validateSemRelease(m, ctx.Sender()); err != nil {
		refuse(ctx, p.env, m, err)
		return
	}
	env, from := p.env, ctx.Sender()
	g := env.guard(senderRequestID(env, from, m.RequestId))
	env.goCall(nil, func(ctx context.Context) any {
		var err error
		if m.Expirable {
			err = env.releasePermit(ctx, m.Name, []string{m.PermitId}, g)
		} else {
			err = env.releasePermits(ctx, m.Name, m.Permits, g)
		}
		env.System.Root.Send(from, &messages.SemaphoreReleaseResponse{RequestId: m.RequestId, Released: err == nil, Error: primitiveError(err)})
		return nil
	})
}

// senderRequestID is the marker id of a request by message: it must differ
// between senders that reuse request ids.
func senderRequestID(env *runtimeEnv, from *actor.PID, requestID string) string {
	return env.RuntimeID + ":" + pidKey(from) + ":" + requestID
}

// isPrimitiveRouted tells a child which messages the primitives actor counted
// when forwarding them (the idle handshake compares the counts).
func isPrimitiveRouted(msg any) bool {
	switch msg.(type) {
	case primitiveRouted, *messages.OfferRequest, *messages.TakeRequest,
		*messages.SemaphoreAcquireRequest, *messages.CancelWaitRequest:
		return true
	}
	return false
}
