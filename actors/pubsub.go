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

// Topic is a channel name, or a glob pattern when Pattern is set.
type Topic struct {
	Name    string
	Pattern bool
}

// Subscribe adds Subscriber to Topic. The router answers with Subscribed once
// Redis has confirmed the subscription (at once if it already had).
type Subscribe struct {
	Topic      Topic
	Subscriber *actor.PID
}

// Unsubscribe removes Subscriber from Topic.
type Unsubscribe struct {
	Topic      Topic
	Subscriber *actor.PID
}

// Subscribed tells a subscriber that Topic is live: from now on no message
// is missed until the next Subscribed. Messages published before it may have
// been missed (first subscription, or a reconnect), so re-check state now.
type Subscribed struct{ Topic Topic }

// Published is one pub/sub message delivered to a subscriber.
type Published struct {
	Topic   Topic
	Channel string
	Payload string
}

// Router events from the connection goroutines.
type (
	psConfirmed struct{ topic Topic }
	psMessage   struct {
		topic            Topic
		channel, payload string
	}
	// psReset: the connection was replaced or re-established; every topic
	// is re-subscribed and confirmed anew.
	psReset struct{ reason error }
)

// router owns the runtime's one pub/sub connection: it subscribes each topic
// once however many local actors want it (refcount by subscriber) and fans
// every message out to them.
type router struct {
	env    *Env
	topics map[Topic]*topicSubs
	conn   *psConn
}

type topicSubs struct {
	subs map[string]*subscriber // by PID
}

type subscriber struct {
	pid  *actor.PID
	live bool // has been sent Subscribed since the last (re)subscription
}

func newRouter(env *Env) *router {
	return &router{env: env, topics: map[Topic]*topicSubs{}}
}

func (r *router) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.conn = startPSConn(r.env, ctx.Self())
		// After a restart the topics survived (see supervisor): subscribe them again.
		for t, ts := range r.topics {
			for _, s := range ts.subs {
				s.live = false
			}
			r.conn.enqueue(psOp{topic: t, subscribe: true})
		}
	case *actor.Stopping, *actor.Restarting:
		r.conn.stop()
	case *Subscribe:
		r.subscribe(m)
	case *Unsubscribe:
		r.unsubscribe(m)
	case *statsQuery:
		m.reply <- len(r.topics)
	case *psConfirmed:
		if ts := r.topics[m.topic]; ts != nil {
			for _, s := range ts.subs {
				if !s.live {
					s.live = true
					r.env.System.Root.Send(s.pid, &Subscribed{Topic: m.topic})
				}
			}
		}
	case *psMessage:
		if ts := r.topics[m.topic]; ts != nil {
			msg := &Published{Topic: m.topic, Channel: m.channel, Payload: m.payload}
			for _, s := range ts.subs {
				r.env.System.Root.Send(s.pid, msg)
			}
		}
	case *psReset:
		r.env.Log.Debug("actorlock: pub/sub connection reset; re-subscribing", slog.Any("reason", m.reason))
		for _, ts := range r.topics {
			for _, s := range ts.subs {
				s.live = false
			}
		}
	}
}

func (r *router) subscribe(m *Subscribe) {
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
			r.env.System.Root.Send(s.pid, &Subscribed{Topic: m.Topic})
		}
	}
}

func (r *router) unsubscribe(m *Unsubscribe) {
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
	topic     Topic
	subscribe bool
	ping      bool
}

// psConn is the connection itself: a writer goroutine applies subscription
// changes in order (go-redis writes, and may dial, under its own mutex, which
// must not happen inside Receive), a reader goroutine turns what arrives into
// router events and watches the connection's health.
type psConn struct {
	env    *Env
	router *actor.PID
	quit   chan struct{}

	mu     sync.Mutex
	ps     *redis.PubSub
	wanted map[Topic]struct{} // what a replacement connection subscribes
	queue  []psOp
	wake   chan struct{} // a buffered signal: queue is non-empty
}

// healthInterval: a connection silent this long is pinged; silent for two,
// it is replaced (a half-open TCP connection never reports an error).
const healthInterval = time.Second

func startPSConn(env *Env, router *actor.PID) *psConn {
	c := &psConn{
		env:    env,
		router: router,
		quit:   make(chan struct{}),
		ps:     env.Redis.Subscribe(context.Background()),
		wanted: map[Topic]struct{}{},
		wake:   make(chan struct{}, 1),
	}
	env.calls.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c
}

func (c *psConn) enqueue(op psOp) {
	c.mu.Lock()
	c.queue = append(c.queue, op)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stop closes the connection; its goroutines end on their own (the
// runtime's Stop waits for them). Not waiting here keeps Receive from
// blocking, possibly on the very goroutine it would wait for.
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

func (c *psConn) emit(ev any) { c.env.System.Root.Send(c.router, ev) }

func (c *psConn) writeLoop() {
	defer c.env.calls.Done()
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.mu.Unlock()
				break
			}
			op := c.queue[0]
			c.queue = c.queue[1:]
			if op.subscribe {
				c.wanted[op.topic] = struct{}{}
			} else if !op.ping {
				delete(c.wanted, op.topic)
			}
			ps := c.ps
			c.mu.Unlock()
			// A failed write is healed by the reader: go-redis reconnects and
			// re-subscribes everything, and the reader reports a reset.
			_ = apply(ps, op)
		}
	}
}

func apply(ps *redis.PubSub, op psOp) error {
	ctx := context.Background()
	switch {
	case op.ping:
		return ps.Ping(ctx)
	case op.subscribe && op.topic.Pattern:
		return ps.PSubscribe(ctx, op.topic.Name)
	case op.subscribe:
		return ps.Subscribe(ctx, op.topic.Name)
	case op.topic.Pattern:
		return ps.PUnsubscribe(ctx, op.topic.Name)
	default:
		return ps.Unsubscribe(ctx, op.topic.Name)
	}
}

func (c *psConn) readLoop() {
	defer c.env.calls.Done()
	pinged := false
	backoff := time.Duration(0)
	for {
		c.mu.Lock()
		ps := c.ps
		c.mu.Unlock()
		msg, err := ps.ReceiveTimeout(context.Background(), healthInterval)
		select {
		case <-c.quit:
			return
		default:
		}
		if err != nil {
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				if !pinged {
					pinged = true
					c.enqueue(psOp{ping: true})
					continue
				}
				err = errors.New("no reply to ping")
				c.replace()
			}
			// go-redis has dropped the connection and re-dials, then
			// re-subscribes, on the next receive: whatever was published
			// meanwhile is lost, so every topic must be confirmed anew.
			pinged = false
			c.emit(&psReset{reason: err})
			backoff = min(max(2*backoff, 20*time.Millisecond), time.Second)
			select {
			case <-c.quit:
				return
			case <-time.After(backoff):
			}
			continue
		}
		pinged, backoff = false, 0
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				c.emit(&psConfirmed{topic: Topic{Name: m.Channel}})
			case "psubscribe":
				c.emit(&psConfirmed{topic: Topic{Name: m.Channel, Pattern: true}})
			}
		case *redis.Message:
			t := Topic{Name: m.Channel}
			if m.Pattern != "" {
				t = Topic{Name: m.Pattern, Pattern: true}
			}
			c.emit(&psMessage{topic: t, channel: m.Channel, payload: m.Payload})
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
	var chans, pats []string
	for t := range c.wanted {
		if t.Pattern {
			pats = append(pats, t.Name)
		} else {
			chans = append(chans, t.Name)
		}
	}
	// Failures here are retried by the next receive, which re-dials and
	// re-subscribes what these calls recorded.
	ctx, cancel := context.WithTimeout(context.Background(), c.env.CallTimeout)
	defer cancel()
	if len(chans) > 0 {
		_ = c.ps.Subscribe(ctx, chans...)
	}
	if len(pats) > 0 {
		_ = c.ps.PSubscribe(ctx, pats...)
	}
}
