package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One timer serves many entries: each fires once when due, a move later is
// honoured without firing early, a move earlier fires at the new time, a
// cancelled entry never fires, and the heap forgets what fired or was
// cancelled.
func TestWakeupsFireEachEntryWhenDue(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	type fired struct {
		w  *wakeup
		at time.Duration
	}
	got := make(chan fired, 16)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*wakeupDue); ok {
			got <- fired{m.w, since()}
		}
	}))
	t.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })
	ws := newWakeups(localSender{sys.Root})
	t.Cleanup(ws.stop)

	var later, earlier, cancelled, plain wakeup
	start := since()
	ws.set(&later, pid, start+300*time.Millisecond)
	ws.set(&later, pid, start+1200*time.Millisecond)
	ws.set(&earlier, pid, start+2*time.Second)
	ws.set(&earlier, pid, start+600*time.Millisecond)
	ws.set(&cancelled, pid, start+400*time.Millisecond)
	ws.cancel(&cancelled)
	ws.set(&plain, pid, start+900*time.Millisecond)

	var order []*wakeup
	for range 3 {
		select {
		case f := <-got:
			require.True(t, f.w.due(&wakeupDue{w: f.w}), "due when it arrives")
			assert.GreaterOrEqual(t, f.at, f.w.at)
			assert.Less(t, f.at-f.w.at, 500*time.Millisecond, "on time")
			order = append(order, f.w)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "an entry did not fire")
		}
	}
	assert.Equal(t, []*wakeup{&earlier, &plain, &later}, order)
	select {
	case f := <-got:
		require.Failf(t, "fired twice or cancelled entry fired", "%p", f.w)
	case <-time.After(500 * time.Millisecond):
	}
	ws.mu.Lock()
	assert.Empty(t, ws.entries)
	ws.mu.Unlock()

	// A message overtaken by a move later is stale; after cancel too.
	ws.set(&plain, pid, since()+time.Hour)
	assert.False(t, plain.due(&wakeupDue{w: &plain}))
	ws.cancel(&plain)
	assert.False(t, plain.due(&wakeupDue{w: &plain}))
	assert.False(t, plain.due(&wakeupDue{w: &later}), "another entry's firing")
}
