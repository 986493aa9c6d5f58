package sim

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/messages"
)

// An owner actor: acquisitions by message (Runtime.PID), as an actor of
// the user's would make them. The runtime watches it: when it stops, what
// it held or waited for is released at once.
type ownerActor struct {
	pid     *actor.PID // the runtime's
	token   string
	pending chan<- any // the current step's answer
}

// Steps a worker sends its owner actor.
type (
	msgAcquire struct {
		req   *messages.AcquireRequest
		reply chan<- any
	}
	msgRelease struct {
		req   *messages.ReleaseRequest
		reply chan<- any
	}
	msgCancel struct{ req *messages.CancelRequest }
)

func (a *ownerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case msgAcquire:
		m.req.OwnerToken = a.token
		a.pending = m.reply
		c.Request(a.pid, m.req)
	case msgRelease:
		m.req.OwnerToken = a.token
		a.pending = m.reply
		c.Request(a.pid, m.req)
	case msgCancel:
		m.req.OwnerToken = a.token
		c.Request(a.pid, m.req) // its CancelResponse is not awaited
	case *messages.AcquireResponse:
		if m.Acquired && a.token == "" {
			a.token = m.OwnerToken
		}
		a.answer(m)
	case *messages.ReleaseResponse:
		a.answer(m)
	}
}

func (a *ownerActor) answer(m any) {
	if a.pending != nil {
		a.pending <- m
		a.pending = nil
	}
}

// byMessage: an owner actor acquires a name (sometimes twice: a
// re-entry by its token), then releases, is cancelled while waiting, or
// stops while holding.
func (wk *worker) byMessage() {
	m := wk.w.model
	rt, _ := wk.snapshot()
	n := wk.pickName()
	kind := map[int]messages.Kind{kLock: messages.Kind_KIND_LOCK, kFair: messages.Kind_KIND_FAIR, kRW: messages.Kind_KIND_READ}[n.kind]
	if n.kind == kRW && wk.rng.IntN(2) == 0 {
		kind = messages.Kind_KIND_WRITE
	}
	sys := rt.ActorSystem()
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &ownerActor{pid: rt.PID()} }))
	defer sys.Root.Stop(pid)
	tol := wk.w.cfg.tol
	held := 0
	owner := ""
	step := func(msg any, what string) any {
		reply := make(chan any, 1)
		switch s := msg.(type) {
		case msgAcquire:
			s.reply = reply
			msg = s
		case msgRelease:
			s.reply = reply
			msg = s
		}
		id := m.begin(wk.id, what+" "+n.name, n.name, 3*time.Second+tol)
		defer m.end(id)
		sys.Root.Send(pid, msg)
		select {
		case r := <-reply:
			return r
		case <-time.After(3*time.Second + tol):
			return nil // the request check reports it
		case <-wk.w.ctx.Done():
			return nil
		}
	}
	field := func() string {
		if kind == messages.Kind_KIND_WRITE && owner != "" {
			return owner + ":write"
		}
		return owner
	}
	// The owner's field counts as in flight while the actor may hold.
	defer func() {
		if owner != "" {
			m.opEnd(n, field())
		}
	}()
	for i := 0; i < 1+wk.rng.IntN(2); i++ {
		reqID := fmt.Sprintf("w%d-%d", wk.id, wk.rng.Uint64())
		req := &messages.AcquireRequest{RequestId: reqID, Name: n.name, Kind: kind, WaitMs: int64(wk.rng.IntN(200))}
		if wk.rng.IntN(3) == 0 {
			req.LeaseMs = int64(wk.dur(wk.w.cfg.leaseMin, wk.w.cfg.leaseMax) / time.Millisecond)
		}
		if held > 0 && wk.rng.IntN(3) == 0 {
			// A cancel names its owner by token: the re-entry's.
			// Cancelled while it waits (or after it got it: then the
			// cancel is too late and the answer says so).
			pause := wk.dur(0, 20*time.Millisecond) // the rng is the worker's alone
			go func() {
				time.Sleep(pause)
				sys.Root.Send(pid, msgCancel{req: &messages.CancelRequest{RequestId: reqID, Name: n.name, Kind: kind}})
			}()
		}
		r, _ := step(msgAcquire{req: req}, "message acquire").(*messages.AcquireResponse)
		if r == nil || !r.Acquired {
			break
		}
		if owner == "" {
			owner = r.Owner
			m.opStart(n, field())
		}
		held++
		m.mu.Lock()
		n.record(wk.id, "message acquire by %s token %d count %d", short(owner), r.FencingToken, r.HoldCount)
		m.mu.Unlock()
	}
	if held == 0 {
		return
	}
	if wk.rng.IntN(4) == 0 {
		// Stop while holding: the runtime releases at once (deferred Stop).
		m.mu.Lock()
		n.record(wk.id, "owner actor %s stops holding %d", short(owner), held)
		m.mu.Unlock()
		sys.Root.StopFuture(pid).Wait()
		return
	}
	for ; held > 0; held-- {
		r, _ := step(msgRelease{req: &messages.ReleaseRequest{RequestId: fmt.Sprintf("w%d-%d", wk.id, wk.rng.Uint64()), Name: n.name, Kind: kind}}, "message release").(*messages.ReleaseResponse)
		m.mu.Lock()
		if r == nil {
			n.record(wk.id, "message release by %s -> no answer", short(owner))
		} else {
			n.record(wk.id, "message release by %s -> released %v count %d err %v", short(owner), r.Released, r.HoldCount, r.Error)
		}
		m.mu.Unlock()
		if r == nil || r.Error != nil {
			break
		}
	}
}
