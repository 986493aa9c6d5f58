package actors

import (
	"container/heap"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// wakeups is one runtime timer for the validity deadlines of every lock
// actor: a heap of entries, each owned by one actor, that sends its owner a
// *wakeupDue when its time comes. A timer per held name (~200 bytes each,
// with 100k names held) is what it saves.
//
// The deadlines it serves keep moving later (every renewal moves a hold's
// validity by lease/3): moving an entry later only records the new time,
// and the entry is put back in the heap at that time when it surfaces, so a
// name costs one heap operation per lease or so, not one per renewal. Only
// a move earlier reorders the heap at once.
type wakeups struct {
	root localSender

	mu      sync.Mutex
	entries wakeupHeap
	timer   *time.Timer
	next    time.Duration // when timer fires, since epoch; 0: not armed
	stopped bool
}

// wakeup is an entry of wakeups, embedded in its owner; only its owner
// changes at, the heap's side is under wakeups.mu.
type wakeup struct {
	at    time.Duration // when due, since epoch; 0: not armed
	to    *actor.PID
	key   time.Duration // the entry's place in the heap: at, or earlier
	index int           // in the heap; -1: not in it
	rec   *dormant      // the manager's entry of a dormant name; nil: a lock actor's
}

type wakeupDue struct{ w *wakeup }

func newWakeups(root localSender) *wakeups { return &wakeups{root: root} }

// set arms w to send to to at (since epoch), earlier or later than before.
func (ws *wakeups) set(w *wakeup, to *actor.PID, at time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.at, w.to = max(at, 1), to
	switch {
	case !ws.holds(w):
		w.key = w.at
		heap.Push(&ws.entries, w)
	case w.at < w.key:
		w.key = w.at
		heap.Fix(&ws.entries, w.index)
	}
	ws.arm()
}

// cancel disarms w and takes it out of the heap, which keeps no reference
// to its owner.
func (ws *wakeups) cancel(w *wakeup) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.at = 0
	if ws.holds(w) {
		heap.Remove(&ws.entries, w.index)
	}
}

// holds reports whether w is in the heap (a zero entry's index 0 is no
// proof). Under mu.
func (ws *wakeups) holds(w *wakeup) bool {
	return w.index >= 0 && w.index < len(ws.entries) && ws.entries[w.index] == w
}

// due reports whether a *wakeupDue of w is current: w is still armed and
// its time has come (a move later may have overtaken the message).
func (w *wakeup) due(m *wakeupDue) bool {
	return m.w == w && w.at != 0 && since() >= w.at
}

// arm keeps the timer at the heap's earliest key. Under mu.
func (ws *wakeups) arm() {
	if ws.stopped || len(ws.entries) == 0 {
		return
	}
	at := ws.entries[0].key
	if ws.next != 0 && ws.next <= at {
		return
	}
	ws.next = at
	d := max(at-since(), 0)
	if ws.timer == nil {
		ws.timer = time.AfterFunc(d, ws.fire)
		return
	}
	ws.timer.Reset(d)
}

// fire sends every entry that is due to its owner, and puts back those
// moved later meanwhile.
func (ws *wakeups) fire() {
	type send struct {
		to *actor.PID
		w  *wakeup
	}
	var due []send
	ws.mu.Lock()
	ws.next = 0
	now := since()
	for len(ws.entries) > 0 && ws.entries[0].key <= now {
		w := ws.entries[0]
		if w.at > now {
			w.key = w.at
			heap.Fix(&ws.entries, 0)
			continue
		}
		heap.Pop(&ws.entries)
		due = append(due, send{w.to, w})
	}
	ws.arm()
	ws.mu.Unlock()
	for _, d := range due {
		ws.root.Send(d.to, &wakeupDue{w: d.w})
	}
}

// stop disarms the timer for good: Close.
func (ws *wakeups) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.stopped = true
	if ws.timer != nil {
		ws.timer.Stop()
	}
}

type wakeupHeap []*wakeup

func (h wakeupHeap) Len() int           { return len(h) }
func (h wakeupHeap) Less(i, j int) bool { return h[i].key < h[j].key }
func (h wakeupHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *wakeupHeap) Push(x any) {
	w := x.(*wakeup)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *wakeupHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	if c := cap(old); c > 1024 && len(*h) < c/4 {
		// Give back what a peak of held names left (8 bytes a name).
		*h = append(wakeupHeap(nil), *h...)
	}
	w.index = -1
	return w
}
