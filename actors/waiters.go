package actors

import (
	"container/list"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// waitEntry is the bookkeeping a waiting request of the queue and semaphore
// actors carries: its id, its actor caller, its place in the FIFO and its
// deadline timer.
type waitEntry struct {
	key      reqKey
	from     *actor.PID // actor caller; nil for a Go caller
	protoID  string
	elem     *list.Element
	stop     scheduler.CancelFunc
	answered bool
}

// forget marks the request answered and takes it off fifo and its timer.
func (w *waitEntry) forget(fifo *list.List) {
	w.answered = true
	if w.stop != nil {
		w.stop()
	}
	if w.elem != nil {
		fifo.Remove(w.elem)
		w.elem = nil
	}
}
