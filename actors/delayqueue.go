package actors

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// safetyInterval is how often a mover moves due items even when nothing
// told it to: a lost publish or a missed reconnect costs at most this.
const safetyInterval = 2 * time.Second

// mover moves the due items of one delayed queue into its destination list.
// It runs while a handle of the queue is open here or the queue has items
// pending, so items whose producer went away are still delivered. Wake-ups:
//
//   - a timer armed for the earliest due time (known from the last move, or
//     from the queue's channel, which announces each new earliest item);
//   - the channel's (re)subscription, since messages may have been missed;
//   - a safety tick every safetyInterval.
//
// At most one move call is in flight; a wake-up meanwhile runs another
// after it. Movers of several processes race safely: a move is one atomic
// script, so each item is moved exactly once.
type mover struct {
	env   *runtimeEnv
	key   primitiveKey
	self  *actor.PID
	idle  idleness
	topic topic

	handles  int  // open handles in this runtime
	pending  bool // items remain in the queue, as last seen
	inflight bool
	again    bool // a wake-up came while a move was in flight

	due deadline // the next due time known

	safetyStop scheduler.CancelFunc

	// offsetMs is the server's clock minus ours (wall ms), as measured by
	// the last move, to turn a published due time into a local timer.
	offsetMs    int64
	offsetKnown bool
}

type (
	moveSafety struct{}
	moveDone   struct {
		moved      scripts.Moved
		sent, recv time.Time
		err        error
	}
)

func newMover(env *runtimeEnv, key primitiveKey) *mover {
	return &mover{
		env: env, key: key,
		topic: topic(scripts.DelayChannel(key.Name)),
	}
}

func (q *mover) Receive(ctx actor.Context) {
	msg := ctx.Message()
	q.idle.note(isPrimitiveRouted(msg))
	switch m := msg.(type) {
	case *actor.Started:
		q.self = ctx.Self()
		q.env.deliver(q.env.router, &subscribe{Topic: q.topic, Subscriber: q.self})
		q.safetyStop = q.env.timers.SendRepeatedly(safetyInterval, safetyInterval, q.self, &moveSafety{})
		q.move()
	case *actor.Stopping:
		q.due.cancel()
		if q.safetyStop != nil {
			q.safetyStop()
		}
		q.idle.cancel()
		q.env.deliver(q.env.router, &unsubscribe{Topic: q.topic, Subscriber: q.self})
		return
	case *DelayedOpen:
		q.handles++
	case *DelayedClose:
		q.handles = max(q.handles-1, 0)
	case *messages.OfferRequest:
		q.pending = true
		q.offer(ctx.Sender(), m)
	case *subscribed:
		q.move()
	case *published:
		q.published(m.Payload)
	case *timerFired:
		if q.due.fired(m) {
			q.move()
		}
	case *moveSafety:
		q.move()
	case *moveDone:
		q.moved(m)
	case *idleDue:
		idleFired(&q.idle, ctx, q.env, m, q.key, q.isIdle())
		return
	}
	q.idle.sync(ctx, q.env, q.isIdle())
}

func (q *mover) isIdle() bool {
	return q.handles == 0 && !q.pending && !q.inflight
}

func (q *mover) move() {
	if q.inflight {
		q.again = true
		return
	}
	q.inflight = true
	env, name := q.env, q.key.Name
	env.goCall(q.self, func(ctx context.Context) any {
		d := &moveDone{sent: time.Now()}
		d.moved, d.err = scripts.MoveDue(ctx, env.Redis, name)
		d.recv = time.Now()
		return d
	})
}

func (q *mover) moved(d *moveDone) {
	q.inflight = false
	if d.err != nil {
		q.env.Log.Warn("actorlock: delayed queue move failed", slog.String("queue", q.key.Name), slog.Any("error", d.err))
		q.pending = true
		// Try again soon; the safety tick keeps trying after that. A list
		// name another kind holds (one kind per name) will not change soon:
		// the safety tick only.
		if !errors.Is(d.err, scripts.ErrWrongKind) {
			q.arm(100 * time.Millisecond)
		}
		return
	}
	q.env.Observe.queueLateness(q.key.Name, d.moved.Late)
	mid := d.sent.Add(d.recv.Sub(d.sent) / 2)
	q.offsetMs, q.offsetKnown = d.moved.ServerNow-mid.UnixMilli(), true
	q.pending = d.moved.Next >= 0
	if d.moved.N >= scripts.MaxMoveBatch || d.moved.Next == 0 || q.again {
		// A full batch, or one cut short before a tie it could not take
		// whole: more may be due now.
		q.again = false
		q.move()
		return
	}
	if d.moved.Next >= 0 {
		// Due within the millisecond: the server's ms clock has not turned
		// yet; look again right after.
		q.arm(max(d.moved.Next, time.Millisecond))
	}
}

// published handles a new earliest due time (server clock, Unix ms).
func (q *mover) published(payload string) {
	q.pending = true
	due, err := strconv.ParseInt(payload, 10, 64)
	if err != nil || !q.offsetKnown {
		q.move()
		return
	}
	wait := time.Duration(due-(time.Now().UnixMilli()+q.offsetMs)) * time.Millisecond
	if wait <= 0 {
		q.move()
		return
	}
	q.arm(wait)
}

// arm keeps one due timer, at the earliest time asked for.
func (q *mover) arm(wait time.Duration) {
	q.due.setEarliest(q.env.timers, q.self, time.Now().Add(wait))
}

// offer stores an item offered by message, answering its sender from the
// call.
func (q *mover) offer(from *actor.PID, m *messages.OfferRequest) {
	env, name := q.env, q.key.Name
	args := scripts.OfferArgs{
		Name: name, Member: scripts.DelayMember(randomID(), m.Payload),
		Delay: time.Duration(m.DelayMs) * time.Millisecond,
	}
	// The request's guard, by its sender's id: the same request sent again
	// (its answer was lost) finds it and offers nothing more.
	g := env.guard(senderRequestID(env, from, m.RequestId))
	env.goCall(nil, func(ctx context.Context) any {
		err := env.offerDelayed(ctx, args, g)
		env.System.Root.Send(from, &messages.OfferResponse{RequestId: m.RequestId, Error: primitiveError(err)})
		return nil
	})
}
