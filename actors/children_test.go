package actors

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChildrenRegistry(t *testing.T) {
	n := 0
	spawn := func() *actor.PID {
		n++
		return actor.NewPID(localAddress, "mgr/$"+strconv.Itoa(n))
	}
	c := newChildren[string]()
	c.class = func(k string) int {
		if k == "mover" {
			return 0
		}
		return 1
	}

	a := c.route("a", spawn)
	require.Same(t, a, c.route("a", spawn), "one child per key")
	assert.Equal(t, uint32(2), a.routed)
	c.route("mover", spawn)
	assert.Equal(t, 2, c.len())
	assert.Equal(t, [2]int{1, 1}, c.counts)

	// Idle handshake: a report that missed a routed request is ignored.
	assert.Nil(t, c.idle("a", a.pid, 1))
	assert.Nil(t, c.idle("a", actor.NewPID(localAddress, "mgr/$99"), 2), "not the child of a")
	assert.Equal(t, a.pid, c.idle("a", a.pid, 2))
	assert.Nil(t, c.get("a"))
	_, ok := c.terminated(a.pid)
	assert.False(t, ok, "stopped as idle: already forgotten")

	// A new child of the same key is not forgotten by its predecessor's end.
	b := c.route("a", spawn)
	require.NotEqual(t, a.pid.Id, b.pid.Id)
	_, ok = c.terminated(a.pid)
	assert.False(t, ok)
	assert.Same(t, b, c.get("a"))

	k, ok := c.terminated(actor.NewPID(localAddress, b.pid.Id))
	assert.True(t, ok, "found by PID id, whichever *PID names it")
	assert.Equal(t, "a", k)
	assert.Nil(t, c.get("a"))
	assert.Equal(t, [2]int{1, 0}, c.counts)
	assert.Equal(t, 1, c.len())
	assert.Len(t, c.byID, 1)
}
