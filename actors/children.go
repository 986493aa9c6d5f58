package actors

import "github.com/asynkron/protoactor-go/actor"

// children is the registry of the per-name child actors of one parent (the
// lock manager's lock actors, the primitives actor's children): by key, to
// route requests, and by PID id, because a Terminated names only the PID.
// Every operation is O(1), so a parent with 100k children stops them all in
// linear time.
type children[K comparable] struct {
	byKey map[K]*child[K]
	byID  map[string]*child[K]
	// class, if set, sorts children into counted classes, so that Stats
	// need not walk them all.
	class  func(K) int
	counts [2]int
}

type child[K comparable] struct {
	key    K
	pid    *actor.PID
	routed uint32 // requests forwarded to it (the idle handshake compares)
}

func newChildren[K comparable]() children[K] {
	return children[K]{byKey: map[K]*child[K]{}, byID: map[string]*child[K]{}}
}

func (c *children[K]) get(k K) *child[K] { return c.byKey[k] }

func (c *children[K]) len() int { return len(c.byKey) }

// route returns the child serving k, spawning it with spawn if there is
// none, and counts one more request forwarded to it.
func (c *children[K]) route(k K, spawn func() *actor.PID) *child[K] {
	ch := c.byKey[k]
	if ch == nil {
		ch = &child[K]{key: k, pid: spawn()}
		c.byKey[k] = ch
		c.byID[ch.pid.Id] = ch
		if c.class != nil {
			c.counts[c.class(k)]++
		}
	}
	ch.routed++
	return ch
}

// idle is the parent's side of the idle handshake: a child that reported
// idle after routed requests is forgotten, and returned to be stopped,
// unless it is no longer the child of k or more was routed to it since
// (it will process that and report again).
func (c *children[K]) idle(k K, pid *actor.PID, routed uint32) *actor.PID {
	ch := c.byKey[k]
	if ch == nil || !samePID(ch.pid, pid) || ch.routed != routed {
		return nil
	}
	c.remove(ch)
	return ch.pid
}

// stopIdle is the parent's whole side of the idle handshake, the same for
// every parent (the report's message type is the child's): it stops the
// child that reported idle if idle lets it go.
func (c *children[K]) stopIdle(ctx actor.Context, k K, pid *actor.PID, routed uint32) {
	if pid := c.idle(k, pid, routed); pid != nil {
		ctx.Stop(pid)
	}
}

// terminated forgets the child pid names, if it is one still registered.
func (c *children[K]) terminated(pid *actor.PID) (K, bool) {
	ch := c.byID[pid.GetId()]
	if ch == nil || !samePID(ch.pid, pid) {
		var zero K
		return zero, false
	}
	c.remove(ch)
	return ch.key, true
}

func (c *children[K]) remove(ch *child[K]) {
	delete(c.byID, ch.pid.Id)
	if c.byKey[ch.key] == ch {
		delete(c.byKey, ch.key)
		if c.class != nil {
			c.counts[c.class(ch.key)]--
		}
	}
}

// each calls fn for every child.
func (c *children[K]) each(fn func(*child[K])) {
	for _, ch := range c.byKey {
		fn(ch)
	}
}
