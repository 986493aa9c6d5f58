package actors

import (
	"container/list"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// waiters is the queue of requests waiting in a per-name actor (the lock
// and semaphore actors): pending by id, those that wait in arrival order
// in a FIFO (single attempts and re-entries wait outside it), each with
// its deadline timer, answered exactly once. What the actor does around
// it (who may try, and when) stays in the actor.
//
// A result that comes back after its request was answered (cancelled,
// timed out, its caller gone) is handled on the actor: it arrives as a
// message, the request says answered, and the actor gives back what was
// won (the lock actor's undo). The semaphore actor also gives back from
// the goroutine that ran the call (semOp.abandoned), because it may stop
// while a call is in flight and a plain semaphore's permits, unlike a
// lock's lease, never expire.
type waiters[R waiter] struct {
	fifo    *list.List
	pending map[reqKey]R
	mark    func(R) bool // which requests marked counts; nil: none
	marked  int          // how many marked requests wait in the FIFO
}

// waiter is a request the queue can hold.
type waiter interface {
	comparable
	wait() *waitState
}

// waitState is a request's bookkeeping in the queue.
type waitState struct {
	key      reqKey
	elem     *list.Element // in the FIFO
	stop     scheduler.CancelFunc
	answered bool // a success arriving now must be given back
}

func (w *waitState) wait() *waitState { return w }

func newWaiters[R waiter]() waiters[R] {
	return waiters[R]{fifo: list.New(), pending: map[reqKey]R{}}
}

// marking makes q count the requests in its FIFO that mark reports (marked).
func (q waiters[R]) marking(mark func(R) bool) waiters[R] {
	q.mark = mark
	return q
}

// remark adds d to marked if r is a marked request.
func (q *waiters[R]) remark(r R, d int) {
	if q.mark != nil && q.mark(r) {
		q.marked += d
	}
}

// add makes r pending; false: a request with its id is pending already.
func (q *waiters[R]) add(r R) bool {
	k := r.wait().key
	if _, dup := q.pending[k]; dup {
		return false
	}
	q.pending[k] = r
	return true
}

// get is the pending request with key k.
func (q *waiters[R]) get(k reqKey) (R, bool) {
	r, ok := q.pending[k]
	return r, ok
}

// expireAt sends msg to self at deadline (if any) unless r is answered
// first.
func (q *waiters[R]) expireAt(timers *scheduler.TimerScheduler, self *actor.PID, r R, deadline time.Time, msg any) {
	if !deadline.IsZero() {
		r.wait().stop = timers.SendOnce(time.Until(deadline), self, msg)
	}
}

// pushBack and pushFront put r in the FIFO.
func (q *waiters[R]) pushBack(r R) {
	r.wait().elem = q.fifo.PushBack(r)
	q.remark(r, 1)
}

func (q *waiters[R]) pushFront(r R) {
	r.wait().elem = q.fifo.PushFront(r)
	q.remark(r, 1)
}

// pushAfter puts r in the FIFO right behind the element at.
func (q *waiters[R]) pushAfter(r R, at *list.Element) {
	r.wait().elem = q.fifo.InsertAfter(r, at)
	q.remark(r, 1)
}

// queued reports whether r waits in the FIFO.
func (q *waiters[R]) queued(r R) bool { return r.wait().elem != nil }

// head is the FIFO's first request.
func (q *waiters[R]) head() (R, bool) {
	if e := q.fifo.Front(); e != nil {
		return e.Value.(R), true
	}
	var zero R
	return zero, false
}

// waiting is how many requests wait in the FIFO.
func (q *waiters[R]) waiting() int { return q.fifo.Len() }

// unqueue takes r out of the FIFO, leaving it pending.
func (q *waiters[R]) unqueue(r R) {
	w := r.wait()
	if w.elem != nil {
		q.fifo.Remove(w.elem)
		w.elem = nil
		q.remark(r, -1)
	}
}

// forget marks r answered and drops it from the books (pending, FIFO,
// timer), and reports whether it was the FIFO's head.
func (q *waiters[R]) forget(r R) (wasHead bool) {
	w := r.wait()
	w.answered = true
	delete(q.pending, w.key)
	if w.stop != nil {
		w.stop()
	}
	if w.elem != nil {
		wasHead = q.fifo.Front() == w.elem
		q.fifo.Remove(w.elem)
		w.elem = nil
		q.remark(r, -1)
	}
	return wasHead
}
