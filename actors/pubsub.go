package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
)

// topic is a pub/sub channel.
type topic string

// subscribe adds Subscriber to Topic. The router answers with Subscribed once
// Redis has confirmed the subscription (at once if it already had).
type subscribe struct {
	Topic      topic
	Subscriber *actor.PID
}

// unsubscribe removes Subscriber from Topic.
type unsubscribe struct {
	Topic      topic
	Subscriber *actor.PID
}

// subscribed tells a subscriber that Topic is live: from now on no message
// is missed until the next subscribed. Messages published before it may have
// been missed (first subscription, or a reconnect), so re-check state now.
type subscribed struct{ Topic topic }

// published is one pub/sub message delivered to a subscriber.
type published struct {
	Topic   topic
	Payload string
}

// Router events from the connection goroutines.
type (
	psConfirmed struct{ topic topic }
	psMessage   struct {
		topic   topic
		payload string
	}
	// psReset: a connection was replaced or re-established; its topics
	// (every topic if nil) are re-subscribed and confirmed anew.
	psReset struct {
		reason error
		topics []topic
	}
)

// subscriptions is how the router reaches Redis: one connection for plain
// pub/sub, one per shard for sharded pub/sub. Both apply operations in
// order off the actor and report back with router events.
type subscriptions interface {
	enqueue(op psOp)
	// stop closes the connections; their goroutines end on their own (the
	// runtime's Stop waits for them). Not waiting keeps Receive from
	// blocking, possibly on the very goroutine it would wait for.
	stop()
}

// router owns the runtime's pub/sub connections: it subscribes each topic
// once however many local actors want it (refcount by subscriber) and fans
// every message out to them.
type router struct {
	env    *runtimeEnv
	topics map[topic]*topicSubs
	conn   subscriptions
}

type topicSubs struct {
	subs map[string]*subscriber // by PID
}

type subscriber struct {
	pid  *actor.PID
	live bool // has been sent Subscribed since the last (re)subscription
}

func newRouter(env *runtimeEnv) *router {
	return &router{env: env, topics: map[topic]*topicSubs{}}
}

func (r *router) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if r.env.ShardedPubSub {
			r.conn = startShardedConn(r.env, ctx.Self())
		} else {
			r.conn = startPSConn(r.env, ctx.Self())
		}
		// After a restart the topics survived (see supervisor): subscribe them again.
		for t, ts := range r.topics {
			for _, s := range ts.subs {
				s.live = false
			}
			r.conn.enqueue(psOp{topic: t, subscribe: true})
		}
	case *actor.Stopping, *actor.Restarting:
		r.conn.stop()
	case *subscribe:
		r.subscribe(m)
	case *unsubscribe:
		r.unsubscribe(m)
	case *statsQuery:
		m.reply <- len(r.topics)
	case *psConfirmed:
		// Every subscriber is told, even one already live: a confirmation
		// can answer a SUBSCRIBE made before an UNSUBSCRIBE of the topic,
		// making subscribers live while the connection is, for a moment,
		// not subscribed; an unlock published then is missed, and only
		// the confirmation of the latest SUBSCRIBE, which comes later,
		// can tell them to re-check. Confirmations only answer our own
		// (re)subscriptions, so this costs a re-check now and then.
		if ts := r.topics[m.topic]; ts != nil {
			for _, s := range ts.subs {
				s.live = true
				r.env.System.Root.Send(s.pid, &subscribed{Topic: m.topic})
			}
		}
	case *psMessage:
		if ts := r.topics[m.topic]; ts != nil {
			msg := &published{Topic: m.topic, Payload: m.payload}
			for _, s := range ts.subs {
				r.env.System.Root.Send(s.pid, msg)
			}
		}
	case *psReset:
		r.env.Log.Debug("actorlock: pub/sub connection reset; re-subscribing",
			slog.Any("reason", m.reason), slog.Int("topics", len(m.topics)))
		reset := func(ts *topicSubs) {
			for _, s := range ts.subs {
				s.live = false
			}
		}
		if m.topics == nil {
			for _, ts := range r.topics {
				reset(ts)
			}
		}
		for _, t := range m.topics {
			if ts := r.topics[t]; ts != nil {
				reset(ts)
			}
		}
	}
}

func (r *router) subscribe(m *subscribe) {
	ts := r.topics[m.Topic]
	if ts == nil {
		ts = &topicSubs{subs: map[string]*subscriber{}}
		r.topics[m.Topic] = ts
		r.conn.enqueue(psOp{topic: m.Topic, subscribe: true})
	}
	key := pidKey(m.Subscriber)
	s := ts.subs[key]
	if s == nil {
		s = &subscriber{pid: m.Subscriber}
		ts.subs[key] = s
	}
	// Already confirmed for someone else: this subscriber is live too.
	for _, other := range ts.subs {
		if other.live && !s.live {
			s.live = true
			r.env.System.Root.Send(s.pid, &subscribed{Topic: m.Topic})
		}
	}
}

func (r *router) unsubscribe(m *unsubscribe) {
	ts := r.topics[m.Topic]
	if ts == nil {
		return
	}
	delete(ts.subs, pidKey(m.Subscriber))
	if len(ts.subs) == 0 {
		delete(r.topics, m.Topic)
		r.conn.enqueue(psOp{topic: m.Topic})
	}
}

func pidKey(pid *actor.PID) string { return pid.Address + "/" + pid.Id }

// psOp is one (un)subscription, applied to the connection in order.
type psOp struct {
	topic     topic
	subscribe bool
	ping      bool
}

// opQueue hands operations to a connection's writer goroutine in order
// without ever blocking the sender (the router's Receive).
type opQueue[T any] struct {
	mu   sync.Mutex
	ops  []T
	wake chan struct{} // a buffered signal: ops is non-empty
}

func newOpQueue[T any]() *opQueue[T] { return &opQueue[T]{wake: make(chan struct{}, 1)} }

func (q *opQueue[T]) push(op T) {
	q.mu.Lock()
	q.ops = append(q.ops, op)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *opQueue[T]) pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var op T
	if len(q.ops) == 0 {
		return op, false
	}
	op = q.ops[0]
	q.ops = q.ops[1:]
	return op, true
}

// healthInterval: a connection silent this long is pinged; silent for two,
// it is replaced (a half-open TCP connection never reports an error).
const healthInterval = time.Second

// errSilent: a connection did not answer, not even a ping.
var errSilent = errors.New("pub/sub connection silent, even to a ping")

// healthyReceive returns the next thing ps receives. When ps stays silent for
// healthInterval it calls ping (which must not wait for the reply) and, if
// it stays silent for another, fails with errSilent.
func healthyReceive(ps *redis.PubSub, ping func()) (any, error) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), healthInterval)
		var nerr interface{ Timeout() bool }
		switch {
		case err == nil:
			return msg, nil
		case !errors.As(err, &nerr) || !nerr.Timeout():
			return nil, err
		case pinged:
			return nil, errSilent
		}
		pinged = true
		ping()
	}
}

// routerEvent turns what a connection received into the router's event, or
// nil for what the router does not need.
func routerEvent(msg any) any {
	switch m := msg.(type) {
	case *redis.Subscription:
		if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
			return &psConfirmed{topic: topic(m.Channel)}
		}
	case *redis.Message:
		return &psMessage{topic: topic(m.Channel), payload: m.Payload}
	}
	return nil
}

// psConn is the plain pub/sub connection: a writer goroutine applies
// subscription changes in order (go-redis writes, and may dial, under its
// own mutex, which must not happen inside Receive), a reader goroutine turns
// what arrives into router events and watches the connection's health.
type psConn struct {
	env    *runtimeEnv
	router *actor.PID
	quit   chan struct{}
	ops    *opQueue[psOp]

	mu     sync.Mutex
	ps     *redis.PubSub
	wanted map[topic]struct{} // what a replacement connection subscribes
}

func startPSConn(env *runtimeEnv, router *actor.PID) *psConn {
	c := &psConn{
		env:    env,
		router: router,
		quit:   make(chan struct{}),
		ops:    newOpQueue[psOp](),
		ps:     env.Redis.Subscribe(context.Background()),
		wanted: map[topic]struct{}{},
	}
	env.calls.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c
}

func (c *psConn) enqueue(op psOp) { c.ops.push(op) }

func (c *psConn) stop() {
	select {
	case <-c.quit:
		return
	default:
	}
	close(c.quit)
	c.mu.Lock()
	_ = c.ps.Close()
	c.mu.Unlock()
}

func (c *psConn) emit(ev any) { c.env.deliver(c.router, ev) }

func (c *psConn) writeLoop() {
	defer c.env.calls.Done()
	ctx := context.Background()
	for {
		select {
		case <-c.quit:
			return
		case <-c.ops.wake:
		}
		for op, ok := c.ops.pop(); ok; op, ok = c.ops.pop() {
			c.mu.Lock()
			switch {
			case op.ping:
			case op.subscribe:
				c.wanted[op.topic] = struct{}{}
			default:
				delete(c.wanted, op.topic)
			}
			ps := c.ps
			c.mu.Unlock()
			// A failed write is healed by the reader: go-redis reconnects and
			// re-subscribes everything, and the reader reports a reset.
			switch {
			case op.ping:
				_ = ps.Ping(ctx)
			case op.subscribe:
				_ = ps.Subscribe(ctx, string(op.topic))
			default:
				_ = ps.Unsubscribe(ctx, string(op.topic))
			}
		}
	}
}

func (c *psConn) readLoop() {
	defer c.env.calls.Done()
	backoff := time.Duration(0)
	for {
		c.mu.Lock()
		ps := c.ps
		c.mu.Unlock()
		msg, err := healthyReceive(ps, func() { c.enqueue(psOp{ping: true}) })
		select {
		case <-c.quit:
			return
		default:
		}
		if err != nil {
			if errors.Is(err, errSilent) {
				c.replace()
			}
			// go-redis has dropped the connection and re-dials, then
			// re-subscribes, on the next receive: whatever was published
			// meanwhile is lost, so every topic must be confirmed anew.
			c.emit(&psReset{reason: err})
			backoff = min(max(2*backoff, 20*time.Millisecond), time.Second)
			select {
			case <-c.quit:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if ev := routerEvent(msg); ev != nil {
			c.emit(ev)
		}
	}
}

// replace swaps a connection that stopped answering for a new one carrying
// every wanted topic: go-redis has no way to drop a silent connection other
// than closing the whole PubSub.
func (c *psConn) replace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ps.Close()
	c.ps = c.env.Redis.Subscribe(context.Background())
	chans := make([]string, 0, len(c.wanted))
	for t := range c.wanted {
		chans = append(chans, string(t))
	}
	if len(chans) == 0 {
		return
	}
	// A failure here is retried by the next receive, which re-dials and
	// re-subscribes what this call recorded.
	ctx, cancel := context.WithTimeout(context.Background(), c.env.CallTimeout)
	defer cancel()
	_ = c.ps.Subscribe(ctx, chans...)
}
