package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A deadline moved later fires once, when due, not at its first time.
func TestDeadlineMovesLater(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	fired := make(chan *timerFired, 4)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*timerFired); ok {
			fired <- m
		}
	}))
	t.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })

	var d deadline
	start := time.Now()
	d.moveTo(sys.Root, pid, start.Add(300*time.Millisecond))
	d.moveTo(sys.Root, pid, start.Add(1200*time.Millisecond))
	t.Cleanup(d.cancel)
	m := <-fired
	assert.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond, "fired at its latest time, not its first")
	assert.True(t, d.fired(m))
	assert.False(t, d.fired(m), "a firing counts once")

	// A firing that was under way when the timer moved is stale.
	d.moveTo(sys.Root, pid, time.Now().Add(time.Hour))
	assert.False(t, d.fired(&timerFired{t: &d, seq: d.seq}), "early: the moved timer fires when due")
	d.cancel()
	assert.False(t, d.fired(&timerFired{t: &d, seq: d.seq}), "cancelled")
	select {
	case m := <-fired:
		require.Failf(t, "a cancelled deadline fired", "%+v", m)
	case <-time.After(300 * time.Millisecond):
	}
}
