package actorlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/actorlock/actorlock/observe"
)

// eventBuffer is how many events may wait for the callback; more are
// dropped (and counted) rather than slow the runtime down.
const eventBuffer = 1024

// dispatcher hands events to the WithEvents callback on a goroutine of its
// own, so that the runtime never waits for the callback: emit never
// blocks, and drops an event when the buffer is full.
type dispatcher struct {
	fn      func(observe.Event)
	ch      chan observe.Event
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	dropped atomic.Uint64
}

func newDispatcher(fn func(observe.Event)) *dispatcher {
	if fn == nil {
		return nil
	}
	d := &dispatcher{fn: fn, ch: make(chan observe.Event, eventBuffer), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

func (d *dispatcher) emit(e observe.Event) {
	if d == nil {
		return
	}
	if d.stopped.Load() {
		d.dropped.Add(1)
		return
	}
	e.Time = time.Now()
	select {
	case d.ch <- e:
	default:
		d.dropped.Add(1)
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		select {
		case e := <-d.ch:
			d.fn(e)
		case <-d.stop:
			// Deliver what was emitted before Close (the releases Close
			// made among them), then end.
			for {
				select {
				case e := <-d.ch:
					d.fn(e)
				default:
					return
				}
			}
		}
	}
}

// close stops the goroutine once it has delivered what is buffered, or
// when ctx ends (a callback that blocks is then left behind).
func (d *dispatcher) close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	if d.stopped.CompareAndSwap(false, true) {
		close(d.stop)
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the events callback is still running: %w", ctx.Err())
	}
}

// droppedCount is how many events were not delivered (Stats.DroppedEvents).
func (d *dispatcher) droppedCount() uint64 {
	if d == nil {
		return 0
	}
	return d.dropped.Load()
}
