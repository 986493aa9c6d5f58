package actors

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// takeRound bounds one BLPOP: a Take that gave up, or Close, waits at most
// this long for the pop in flight to return (go-redis cannot abort a read).
const takeRound = time.Second

// queueActor serves the Take waiters of one list in this runtime: they wait
// in a FIFO and one BLPOP at a time pops for the head (so a process never
// holds more than one connection per list blocked). An item popped for a
// waiter that has gone (cancelled, timed out, or the runtime closing) is
// given back to the head of the list, never dropped.
type queueActor struct {
	env  *runtimeEnv
	key  primitiveKey
	self *actor.PID
	idle idleness

	queue    waiters[*takeReq]
	inflight *popCall // the BLPOP in flight
	tries    []*popCall
	watched  watchers
}

type takeReq struct {
	waitState
	tryOnce bool
	reply   chan<- TakeResult // Go caller
	from    *actor.PID        // actor caller
	protoID string
}

// popCall is one pop, shared with the goroutine running it: whichever of
// the two learns last that its item has no taker gives the item back.
type popCall struct {
	req *takeReq // a single attempt's request; nil for the FIFO's BLPOP

	mu        sync.Mutex
	abandoned bool // the actor stopped: the goroutine gives back
	delivered bool // the goroutine sent its result: the actor owns it
	value     []byte
	ok        bool
	err       error
}

type (
	popDone      struct{ pc *popCall }
	takeDeadline struct{ r *takeReq }
)

func newQueueActor(env *runtimeEnv, key primitiveKey) *queueActor {
	return &queueActor{
		env: env, key: key,
		queue: newWaiters[*takeReq](),
	}
}

func (a *queueActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	a.idle.note(isPrimitiveRouted(msg))
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
	case *actor.Stopping:
		a.stop(ctx)
		return
	case *Take:
		a.admit(ctx, &takeReq{waitState: waitState{key: reqKey{id: strconv.FormatUint(m.ID, 10)}}, reply: m.Reply}, time.Time{})
	case *TakeCancel:
		a.cancel(ctx, reqKey{id: strconv.FormatUint(m.ID, 10)})
	case *messages.TakeRequest:
		r := &takeReq{
			waitState: waitState{key: reqKey{from: pidKey(ctx.Sender()), id: m.RequestId}},
			from:      ctx.Sender(), protoID: m.RequestId,
			tryOnce: m.WaitMs == 0 && !m.WaitIndefinitely,
		}
		var deadline time.Time
		if m.WaitMs > 0 {
			deadline = time.Now().Add(time.Duration(m.WaitMs) * time.Millisecond)
		}
		a.admit(ctx, r, deadline)
	case *messages.CancelWaitRequest:
		a.cancel(ctx, reqKey{from: pidKey(ctx.Sender()), id: m.RequestId})
	case *takeDeadline:
		if !m.r.answered {
			a.answer(ctx, m.r, TakeResult{})
		}
	case *popDone:
		a.popped(ctx, m.pc)
	case *actor.Terminated:
		a.requesterStopped(ctx, m)
	case *idleDue:
		idleFired(&a.idle, ctx, a.env, m, a.key, a.isIdle())
		return
	}
	a.kick()
	a.idle.sync(ctx, a.env, a.isIdle())
}

func (a *queueActor) isIdle() bool {
	return len(a.queue.pending) == 0 && a.inflight == nil && len(a.tries) == 0
}

func (a *queueActor) admit(ctx actor.Context, r *takeReq, deadline time.Time) {
	if !a.queue.add(r) {
		a.deliver(r, TakeResult{Err: fmt.Errorf("%w: request id %q is already pending", ErrInvalidArgument, r.key.id)})
		return
	}
	a.watched.watch(ctx, r.from)
	a.queue.expireAt(a.env.timers, a.self, r, deadline, &takeDeadline{r: r})
	if r.tryOnce {
		pc := &popCall{req: r}
		a.tries = append(a.tries, pc)
		a.pop(pc, 0)
		return
	}
	a.queue.pushBack(r)
}

// kick starts the BLPOP for the FIFO when waiters wait and none runs.
func (a *queueActor) kick() {
	if a.inflight == nil && a.queue.waiting() > 0 {
		a.inflight = &popCall{}
		a.pop(a.inflight, takeRound)
	}
}

// pop runs one pop off the actor (runtimeEnv.pop): waiting up to wait for
// an item, or not at all.
func (a *queueActor) pop(pc *popCall, wait time.Duration) {
	env, name, self := a.env, a.key.Name, a.self
	env.goCall(nil, func(ctx context.Context) any {
		var (
			v   []byte
			ok  bool
			err error
		)
		v, ok, err = env.pop(ctx, name, wait)
		pc.mu.Lock()
		if pc.abandoned {
			pc.mu.Unlock()
			if ok {
				giveBack(ctx, env, name, v)
			}
			return nil
		}
		pc.value, pc.ok, pc.err, pc.delivered = v, ok, err, true
		pc.mu.Unlock()
		env.System.Root.Send(self, &popDone{pc: pc})
		return nil
	})
}

func (a *queueActor) popped(ctx actor.Context, pc *popCall) {
	if pc == a.inflight {
		a.inflight = nil
	} else {
		for i, x := range a.tries {
			if x == pc {
				a.tries = append(a.tries[:i], a.tries[i+1:]...)
				break
			}
		}
	}
	pc.mu.Lock()
	v, ok, err := pc.value, pc.ok, pc.err
	pc.value, pc.ok = nil, false // consumed: Stopping must not give it back
	pc.mu.Unlock()
	if err != nil {
		err = sentinel.Op("take", a.key.Name, err)
	}
	// The single attempt's own requester first, then the FIFO's head.
	takers := []*takeReq{}
	if pc.req != nil {
		takers = append(takers, pc.req)
	}
	if r, ok := a.queue.head(); ok {
		takers = append(takers, r) // answered ones leave the FIFO at once
	}
	for _, r := range takers {
		if r.answered {
			continue
		}
		switch {
		case ok:
			a.answer(ctx, r, TakeResult{Value: v, OK: true})
			return
		case err != nil:
			a.answer(ctx, r, TakeResult{Err: err})
			return
		case r == pc.req:
			a.answer(ctx, r, TakeResult{}) // a single attempt found nothing
			return
		default:
			return // the BLPOP round ended empty: the head keeps waiting
		}
	}
	if ok {
		giveBack(context.Background(), a.env, a.key.Name, v)
	}
}

// giveBack returns an item nobody takes to the head of its list, carried
// through until it is back (runtimeEnv.carryThrough).
func giveBack(_ context.Context, env *runtimeEnv, name string, v []byte) {
	env.goCall(nil, func(context.Context) any {
		err := env.carryThrough(func(ctx context.Context, g scripts.Guard) error {
			return scripts.GiveBack(ctx, env.batched, name, v, g)
		})
		if err != nil {
			env.Log.Error("actorlock: could not give back an item nobody took", "queue", name, "error", err)
		}
		return nil
	})
}

func (a *queueActor) cancel(ctx actor.Context, k reqKey) {
	if r, ok := a.queue.get(k); ok {
		a.answer(ctx, r, TakeResult{Err: ErrCanceled})
	}
}

func (a *queueActor) answer(ctx actor.Context, r *takeReq, res TakeResult) {
	a.queue.forget(r)
	a.deliver(r, res)
	a.watched.unwatch(ctx, r.from)
}

func (a *queueActor) deliver(r *takeReq, res TakeResult) {
	if r.reply != nil {
		r.reply <- res
		return
	}
	a.env.System.Root.Send(r.from, &messages.TakeResponse{
		RequestId: r.protoID, Taken: res.OK, Payload: res.Value, Error: primitiveError(res.Err),
	})
}

// requesterStopped handles a Terminated for a requester (watchers.terminated
// says what it proves): the requests of a local actor that stopped are
// forgotten (an item handed to it now would be lost); those of a remote
// one are answered (ERROR_CODE_CANCELED), which hands it nothing if it is
// gone and tells it to ask again if it is not.
func (a *queueActor) requesterStopped(ctx actor.Context, m *actor.Terminated) {
	verdict := a.watched.terminated(a.env.System, m)
	for _, r := range a.queue.pending {
		if !samePID(r.from, m.Who) {
			continue
		}
		switch verdict {
		case stoppedHere:
			r.from, r.reply = nil, nil
			a.queue.forget(r)
		case remoteEnded:
			a.answer(ctx, r, TakeResult{Err: errWatchEnded})
		}
	}
}

// stop fails every waiter with ErrClosed and gives back an item already
// popped but not yet handed out; a pop still running gives back its own.
func (a *queueActor) stop(ctx actor.Context) {
	a.idle.cancel()
	for _, r := range a.queue.pending {
		a.answer(ctx, r, TakeResult{Err: ErrClosed})
	}
	calls := append([]*popCall(nil), a.tries...)
	if a.inflight != nil {
		calls = append(calls, a.inflight)
	}
	for _, pc := range calls {
		pc.mu.Lock()
		pc.abandoned = true
		v, ok := pc.value, pc.delivered && pc.ok
		pc.value, pc.ok = nil, false
		pc.mu.Unlock()
		if ok {
			giveBack(context.Background(), a.env, a.key.Name, v)
		}
	}
	a.inflight, a.tries = nil, nil
}
