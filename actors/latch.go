package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// latchRecheck bounds what a lost "0" message costs an awaiter: the count
// is read at least this often while someone awaits.
const latchRecheck = time.Second

// latchActor serves the Await callers of one count-down latch in this
// runtime: one subscription to the latch's channel and one count read at a
// time for all of them. The count is read when the subscription is confirmed
// (first, and after every reconnect, since messages may have been missed),
// when a message arrives, when an awaiter arrives and every latchRecheck.
type latchActor struct {
	env   *runtimeEnv
	key   primitiveKey
	self  *actor.PID
	idle  idleness
	topic topic

	waiters    map[uint64]chan<- error
	subscribed bool
	live       bool // the subscription is confirmed: a read now misses nothing
	inflight   bool
	again      bool
	tickStop   scheduler.CancelFunc
}

type (
	latchRead struct {
		count int64
		err   error
	}
	latchTick struct{}
)

func newLatchActor(env *runtimeEnv, key primitiveKey) *latchActor {
	return &latchActor{
		env: env, key: key,
		topic:   topic(scripts.LatchChannel(key.Name)),
		waiters: map[uint64]chan<- error{},
	}
}

func (a *latchActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	a.idle.note(isPrimitiveRouted(msg))
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
	case *actor.Stopping:
		a.idle.cancel()
		for id, reply := range a.waiters {
			reply <- ErrClosed
			delete(a.waiters, id)
		}
		a.sync(ctx)
		return
	case *Await:
		a.waiters[m.ID] = m.Reply
		if a.live {
			a.read()
		}
	case *AwaitCancel:
		delete(a.waiters, m.ID)
	case *subscribed:
		a.live = a.subscribed
		a.read()
	case *published:
		if m.Payload == "0" {
			// Zero reached: Redisson releases its awaiters on this alone.
			a.release(nil)
		} else {
			a.read()
		}
	case *latchTick:
		a.read()
	case *latchRead:
		a.inflight = false
		switch {
		case errors.Is(m.err, scripts.ErrWrongKind):
			// The name is another kind's: waiting could only end with
			// ctx (one kind per name).
			a.release(m.err)
		case m.err != nil:
			// Awaiters keep waiting; the next tick reads again.
			a.env.Log.Warn("actorlock: reading a count-down latch failed", "latch", a.key.Name, "error", m.err)
		case m.count <= 0:
			a.release(nil)
		}
		if a.again {
			a.again = false
			a.read()
		}
	case *idleDue:
		idleFired(&a.idle, ctx, a.env, m, a.key, a.isIdle())
		return
	}
	a.sync(ctx)
	a.idle.sync(ctx, a.env, a.isIdle())
}

func (a *latchActor) isIdle() bool { return len(a.waiters) == 0 && !a.subscribed && !a.inflight }

func (a *latchActor) release(err error) {
	for id, reply := range a.waiters {
		reply <- err
		delete(a.waiters, id)
	}
}

func (a *latchActor) read() {
	if len(a.waiters) == 0 {
		return
	}
	if a.inflight {
		a.again = true
		return
	}
	a.inflight = true
	env, name := a.env, a.key.Name
	env.goCall(a.self, func(ctx context.Context) any {
		n, err := env.Redis.Get(ctx, name).Int64()
		if err != nil && scripts.IsNil(err) {
			n, err = 0, nil
		}
		err = scripts.WrongType(ctx, env.Redis, name, err)
		if err != nil {
			err = sentinel.Op("read latch", name, err)
		}
		return &latchRead{count: n, err: err}
	})
}

// sync keeps the subscription and the recheck ticker exactly while
// someone awaits.
func (a *latchActor) sync(ctx actor.Context) {
	waiting := len(a.waiters) > 0
	switch {
	case waiting && !a.subscribed:
		a.subscribed = true
		a.env.deliver(a.env.router, &subscribe{Topic: a.topic, Subscriber: a.self})
		a.tickStop = a.env.timers.SendRepeatedly(latchRecheck, latchRecheck, a.self, &latchTick{})
	case !waiting && a.subscribed:
		a.subscribed, a.live = false, false
		a.env.deliver(a.env.router, &unsubscribe{Topic: a.topic, Subscriber: a.self})
		if a.tickStop != nil {
			a.tickStop()
			a.tickStop = nil
		}
	}
}
