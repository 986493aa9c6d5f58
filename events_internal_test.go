package actorlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/observe"
)

// A callback that falls behind never holds up the runtime: events beyond
// the buffer are dropped and counted, every other one is delivered, in
// order; Close delivers what is buffered, then the goroutine ends.
func TestEventsDispatcherDropsWhenFullAndDrainsOnClose(t *testing.T) {
	block := make(chan struct{})
	var delivered atomic.Int64
	var last atomic.Int64
	d := newDispatcher(func(e observe.Event) {
		<-block
		if e.Token <= last.Load() {
			t.Errorf("event %d after %d", e.Token, last.Load())
		}
		last.Store(e.Token)
		delivered.Add(1)
	})
	const n = eventBuffer + 10
	start := time.Now()
	for i := range n {
		d.emit(observe.Event{Kind: observe.EventAcquired, Token: int64(i + 1)})
	}
	assert.Less(t, time.Since(start), time.Second, "emit never waits for the callback")
	assert.GreaterOrEqual(t, d.dropped.Load(), uint64(9), "the buffer holds %d, the goroutine at most one more", eventBuffer)
	close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, d.close(ctx))
	assert.EqualValues(t, n, uint64(delivered.Load())+d.dropped.Load(), "each event is delivered or counted as dropped")
	select {
	case <-d.done:
	default:
		t.Fatal("the goroutine still runs after close")
	}
	d.emit(observe.Event{Kind: observe.EventReleased})
	assert.EqualValues(t, n+1, uint64(delivered.Load())+d.dropped.Load(), "an event after close is dropped")
}

// Close gives up waiting for a callback that blocks when its ctx ends.
func TestEventsDispatcherCloseIsBoundedByCtx(t *testing.T) {
	block := make(chan struct{})
	d := newDispatcher(func(observe.Event) { <-block })
	d.emit(observe.Event{Kind: observe.EventAcquired})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := d.close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(block)
	<-d.done
}
