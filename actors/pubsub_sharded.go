package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
)

// shardedConn subscribes with SSUBSCRIBE on a Redis 7 cluster, where the
// scripts announce with SPUBLISH: a sharded message reaches only the master
// serving its channel's slot, so there is one connection per shard (master)
// that has topics, each carrying the topics whose slots that master serves.
//
// A writer goroutine owns the shards and applies the router's operations in
// order; each shard has a reader goroutine. When a shard's connection fails
// (the master died or failed over, a reply said MOVED, or it went silent)
// or Redis drops a subscription (its slot migrated), the writer reloads the
// cluster layout, re-homes the topics concerned on the masters now serving
// them and tells the router, whose subscribers re-check the state they wait
// on once the topic is confirmed again. Topics with no reachable master wait
// for the next attempt (with back-off up to a second).
type shardedConn struct {
	env    *runtimeEnv
	cc     *redis.ClusterClient
	router *actor.PID
	quit   chan struct{}
	ops    *opQueue[shardOp]

	// Owned by the writer goroutine.
	shards   map[string]*shard // by master address
	home     map[topic]*shard
	homeless map[topic]struct{} // wanted, not subscribed anywhere yet
}

type shard struct {
	addr   string
	ps     *redis.PubSub
	topics map[topic]struct{}
	closed atomic.Bool // set by the writer before it closes ps
}

// shardOp is one operation for the writer: the router's (un)subscriptions,
// and what shard readers report.
type shardOp struct {
	psOp
	shard   *shard
	failed  error // shard's connection failed: re-home all its topics
	dropped bool  // Redis unsubscribed shard from topic: re-home it
}

func startShardedConn(env *runtimeEnv, router *actor.PID) *shardedConn {
	c := &shardedConn{
		env:      env,
		cc:       env.Cluster,
		router:   router,
		quit:     make(chan struct{}),
		ops:      newOpQueue[shardOp](),
		shards:   map[string]*shard{},
		home:     map[topic]*shard{},
		homeless: map[topic]struct{}{},
	}
	env.calls.Add(1)
	go c.writeLoop()
	return c
}

func (c *shardedConn) enqueue(op psOp) { c.ops.push(shardOp{psOp: op}) }

func (c *shardedConn) stop() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
}

func (c *shardedConn) emit(ev any) { c.env.deliver(c.router, ev) }

func (c *shardedConn) writeLoop() {
	defer c.env.calls.Done()
	defer func() {
		for _, sh := range c.shards {
			c.closeShard(sh)
		}
	}()
	var retry <-chan time.Time
	backoff := time.Duration(0)
	for {
		select {
		case <-c.quit:
			return
		case <-c.ops.wake:
		case <-retry:
			retry = nil
		}
		for op, ok := c.ops.pop(); ok; op, ok = c.ops.pop() {
			c.apply(op)
		}
		if len(c.homeless) == 0 || retry != nil {
			continue
		}
		if c.place() {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 20*time.Millisecond), time.Second)
		retry = time.After(backoff)
	}
}

func (c *shardedConn) apply(op shardOp) {
	switch {
	case op.failed != nil:
		if c.shards[op.shard.addr] == op.shard {
			c.evict(op.shard, op.failed)
		}
	case op.dropped:
		if c.home[op.topic] == op.shard {
			c.unhome(op.topic)
			c.homeless[op.topic] = struct{}{}
			c.cc.ReloadState(context.Background())
			c.emit(&psReset{reason: fmt.Errorf("redis moved the slot of %s", op.topic), topics: []topic{op.topic}})
		}
	case op.ping:
		if c.shards[op.shard.addr] == op.shard {
			ctx, cancel := context.WithTimeout(context.Background(), c.env.CallTimeout)
			_ = op.shard.ps.Ping(ctx) // the reader sees the reply, or the silence
			cancel()
		}
	case op.subscribe:
		if c.home[op.topic] == nil {
			c.homeless[op.topic] = struct{}{}
		}
	default:
		delete(c.homeless, op.topic)
		if sh := c.home[op.topic]; sh != nil {
			c.unhome(op.topic)
			if len(sh.topics) == 0 {
				delete(c.shards, sh.addr)
				c.closeShard(sh)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.env.CallTimeout)
			// A failure surfaces in the shard's reader, which re-homes the rest.
			_ = sh.ps.SUnsubscribe(ctx, string(op.topic))
			cancel()
		}
	}
}

func (c *shardedConn) unhome(t topic) {
	if sh := c.home[t]; sh != nil {
		delete(sh.topics, t)
		delete(c.home, t)
	}
}

// evict drops a failed shard: its topics wait to be placed again, on a
// fresh view of the cluster, and their subscribers learn that messages may
// have been missed.
func (c *shardedConn) evict(sh *shard, reason error) {
	delete(c.shards, sh.addr)
	c.closeShard(sh)
	topics := make([]topic, 0, len(sh.topics))
	for t := range sh.topics {
		delete(c.home, t)
		c.homeless[t] = struct{}{}
		topics = append(topics, t)
	}
	c.cc.ReloadState(context.Background())
	c.emit(&psReset{reason: fmt.Errorf("shard %s: %w", sh.addr, reason), topics: topics})
}

func (c *shardedConn) closeShard(sh *shard) {
	sh.closed.Store(true)
	_ = sh.ps.Close()
}

// place subscribes every homeless topic on the master serving its slot. It
// reports whether all found a home.
func (c *shardedConn) place() bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.env.CallTimeout)
	defer cancel()
	byAddr := map[string][]string{}
	for t := range c.homeless {
		master, err := c.cc.MasterForKey(ctx, string(t))
		if err != nil {
			continue // the cluster layout is unknown for now: try again later
		}
		addr := master.Options().Addr
		byAddr[addr] = append(byAddr[addr], string(t))
	}
	for addr, chans := range byAddr {
		sh := c.shards[addr]
		fresh := sh == nil
		if fresh {
			// The PubSub dials on its first SSUBSCRIBE, to the master of
			// that channel's slot: the reader must not start before (its
			// receive would dial a random node).
			sh = &shard{addr: addr, ps: c.cc.SSubscribe(ctx), topics: map[topic]struct{}{}}
		}
		err := sSubscribe(ctx, sh.ps, chans)
		if fresh && err != nil {
			c.closeShard(sh)
			continue
		}
		for _, ch := range chans {
			t := topic(ch)
			delete(c.homeless, t)
			c.home[t] = sh
			sh.topics[t] = struct{}{}
		}
		if fresh {
			c.shards[addr] = sh
			c.env.calls.Add(1)
			go c.readLoop(sh)
		} else if err != nil {
			c.evict(sh, err)
		}
	}
	if len(c.homeless) > 0 {
		c.cc.ReloadState(ctx)
		return false
	}
	return true
}

// sSubscribe subscribes chans with one SSUBSCRIBE per slot: Redis refuses
// one that spans several (CROSSSLOT).
func sSubscribe(ctx context.Context, ps *redis.PubSub, chans []string) error {
	bySlot := map[uint16][]string{}
	for _, ch := range chans {
		bySlot[hashSlot(ch)] = append(bySlot[hashSlot(ch)], ch)
	}
	for _, group := range bySlot {
		if err := ps.SSubscribe(ctx, group...); err != nil {
			return err
		}
	}
	return nil
}

// readLoop turns what shard receives into router events until the shard is
// closed or fails; a failure goes to the writer, which re-homes its topics.
func (c *shardedConn) readLoop(sh *shard) {
	defer c.env.calls.Done()
	for {
		msg, err := healthyReceive(sh.ps, func() { c.ops.push(shardOp{psOp: psOp{ping: true}, shard: sh}) })
		if sh.closed.Load() {
			return
		}
		if err != nil {
			c.ops.push(shardOp{shard: sh, failed: err})
			return
		}
		if s, ok := msg.(*redis.Subscription); ok && s.Kind == "sunsubscribe" {
			// Ours (the writer unsubscribed) or Redis's (the slot left this
			// master): the writer tells them apart.
			c.ops.push(shardOp{psOp: psOp{topic: topic(s.Channel)}, shard: sh, dropped: true})
			continue
		}
		if ev := routerEvent(msg); ev != nil {
			c.emit(ev)
		}
	}
}
