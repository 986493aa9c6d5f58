package sim

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// An owner actor: acquisitions by message (Runtime.PID), as an actor of
// the user's would make them. The runtime watches it: when it stops, what
// it held or waited for is released at once.
type ownerActor struct {
	pid     *actor.PID // the runtime's
	token   string
	pending chan<- any // the current step's answer
	// pendingID is the current step's request id: a late answer to an
	// earlier step (a retried release's) is not taken for this one's.
	pendingID string
	lost      atomic.Int64 // LockLost messages received
	// lostBefore: lost when the last answer was passed on (read after
	// receiving it): a LockLost after an answer comes after it, the
	// runtime sending both in order.
	lostBefore int64
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
	msgRenew  struct {
		req   *messages.RenewRequest
		reply chan<- any
	}
)

func (a *ownerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case msgAcquire:
		m.req.OwnerToken = a.token
		a.pending, a.pendingID = m.reply, m.req.RequestId
		c.Request(a.pid, m.req)
	case msgRelease:
		m.req.OwnerToken = a.token
		a.pending, a.pendingID = m.reply, m.req.RequestId
		c.Request(a.pid, m.req)
	case msgCancel:
		m.req.OwnerToken = a.token
		c.Request(a.pid, m.req) // its CancelResponse is not awaited
	case msgRenew:
		m.req.OwnerToken = a.token
		a.pending, a.pendingID = m.reply, m.req.RequestId
		c.Request(a.pid, m.req)
	case *messages.RenewResponse:
		a.answer(m, m.RequestId)
	case *messages.AcquireResponse:
		if m.Acquired && a.token == "" {
			a.token = m.OwnerToken
		}
		a.answer(m, m.RequestId)
	case *messages.ReleaseResponse:
		a.answer(m, m.RequestId)
	case *messages.LockLost:
		a.lost.Add(1)
	}
}

func (a *ownerActor) answer(m any, id string) {
	if a.pending != nil && id == a.pendingID {
		a.lostBefore = a.lost.Load()
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
	if wk.rng.IntN(25) == 0 {
		// Rare: the worker follows the hold for up to a few seconds.
		wk.unreachableOwner(rt, n, kind)
		return
	}
	sys := actorkit.System(rt)
	oa := &ownerActor{pid: actorkit.PID(rt)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return oa }))
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
		case msgRenew:
			s.reply = reply
			msg = s
		}
		bound := 3*time.Second + tol
		if _, ok := msg.(msgRelease); ok {
			// A release waits while its owner's re-entry is being settled
			// (up to two call timeouts and the attempt's lease after that
			// attempt), then runs.
			bound = 3*wk.w.cfg.callTimeout + wk.w.cfg.maxLease() + tol
		}
		id := m.begin(wk.id, what+" "+n.name, n.name, bound)
		defer m.end(id)
		sys.Root.Send(pid, msg)
		select {
		case r := <-reply:
			return r
		case <-time.After(bound):
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
	// The acquisitions the client knows of, oldest first: a release names
	// one (fencing_token), or takes the newest.
	var grants []knownGrant
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
		grants = append(grants, knownGrant{r.FencingToken, req})
		m.mu.Lock()
		n.record(wk.id, "message acquire by %s token %d count %d", short(owner), r.FencingToken, r.HoldCount)
		m.mu.Unlock()
		if len(grants) >= 2 && wk.rng.IntN(5) == 0 {
			// The client never saw that answer, releases the newest
			// acquisition it knows of by name, then sends the lost
			// request again: the first answer, the acquisition being
			// held still (a release taking the newest would have taken
			// it: red-team finding RT10-1).
			ok := wk.lostAnswer(n, field, step, oa, &grants, kind)
			held = len(grants)
			if !ok {
				break
			}
			continue
		}
		if wk.rng.IntN(4) == 0 {
			// The client did not see that answer and sends the same
			// request again: the same grant, unless it was lost since
			// (then a LockLost came first, and this is a new grant).
			lost := oa.lostBefore // as r was passed on
			again, _ := step(msgAcquire{req: proto.Clone(req).(*messages.AcquireRequest)}, "message acquire again").(*messages.AcquireResponse)
			if again == nil || !again.Acquired {
				break
			}
			m.mu.Lock()
			n.record(wk.id, "message acquire again by %s -> token %d count %d", short(owner), again.FencingToken, again.HoldCount)
			if again.FencingToken != r.FencingToken {
				if oa.lost.Load() == lost {
					m.fail("a retried AcquireRequest gets the first answer", n, []string{field()},
						"first: token %d count %d; again: token %d count %d", r.FencingToken, r.HoldCount, again.FencingToken, again.HoldCount)
				}
				held++ // a new grant, to release as well
				grants = append(grants, knownGrant{again.FencingToken, req})
			}
			m.mu.Unlock()
		}
	}
	if held == 0 {
		return
	}
	if wk.rng.IntN(3) == 0 {
		// The proof of life a remote owner sends every lease/3; from a
		// local owner that holds, it is answered renewed.
		r, _ := step(msgRenew{req: &messages.RenewRequest{RequestId: fmt.Sprintf("w%d-%d", wk.id, wk.rng.Uint64()), Name: n.name, Kind: kind}}, "message renew").(*messages.RenewResponse)
		m.mu.Lock()
		switch {
		case r == nil:
			n.record(wk.id, "message renew by %s -> no answer", short(owner))
		case r.Renewed:
			n.record(wk.id, "message renew by %s -> renewed, lease %dms", short(owner), r.LeaseMs)
			// What is left of the hold's validity: never more than a
			// watchdog lease, less for a fixed lease_ms.
			if r.LeaseMs < 0 || r.LeaseMs > wk.w.cfg.watchdog.Milliseconds() {
				m.fail("a RenewRequest reports what is left of the hold, at most a watchdog lease", n, []string{field()}, "lease %dms, watchdog %v", r.LeaseMs, wk.w.cfg.watchdog)
			}
		default:
			// The hold may have been lost (faults, DEL, force-unlock, a
			// mid-run Close): then the owner holds nothing here.
			n.record(wk.id, "message renew by %s -> %v", short(owner), r.Error)
			if code := r.Error.GetCode(); code != messages.ErrorCode_ERROR_CODE_NOT_OWNER && code != messages.ErrorCode_ERROR_CODE_CLOSED {
				m.fail("a RenewRequest is renewed or refused as not owned", n, []string{field()}, "answered %v", r.Error)
			}
		}
		m.mu.Unlock()
	}
	if wk.rng.IntN(4) == 0 {
		// Stop while holding: the runtime releases at once (deferred Stop).
		m.mu.Lock()
		n.record(wk.id, "owner actor %s stops holding %d", short(owner), held)
		m.mu.Unlock()
		sys.Root.StopFuture(pid).Wait()
		return
	}
	for len(grants) > 0 {
		id := fmt.Sprintf("w%d-%d", wk.id, wk.rng.Uint64())
		// Half the releases name their acquisition, the others take the
		// newest.
		at, fencing := len(grants)-1, int64(0)
		if wk.rng.IntN(2) == 0 {
			at = wk.rng.IntN(len(grants))
			fencing = grants[at].token
		}
		gone := grants[at]
		rel := &messages.ReleaseRequest{RequestId: id, Name: n.name, Kind: kind, FencingToken: fencing}
		r, _ := step(msgRelease{req: proto.Clone(rel).(*messages.ReleaseRequest)}, "message release").(*messages.ReleaseResponse)
		m.mu.Lock()
		if r == nil {
			n.record(wk.id, "message release by %s of token %d -> no answer", short(owner), fencing)
		} else {
			n.record(wk.id, "message release by %s of token %d -> released %v count %d err %v", short(owner), fencing, r.Released, r.HoldCount, r.Error)
		}
		m.mu.Unlock()
		if r == nil || r.Error != nil {
			break
		}
		grants = append(grants[:at], grants[at+1:]...)
		lostAtFirst := oa.lostBefore // as r was passed on
		if wk.rng.IntN(4) == 0 {
			// The client did not see that answer and sends the same
			// request again: it must get the same outcome, and release
			// nothing more (the owner may hold a re-entry still).
			again, _ := step(msgRelease{req: proto.Clone(rel).(*messages.ReleaseRequest)}, "message release again").(*messages.ReleaseResponse)
			m.mu.Lock()
			if again != nil {
				n.record(wk.id, "message release again by %s -> released %v count %d err %v", short(owner), again.Released, again.HoldCount, again.Error)
				if again.Error == nil && (again.Released != r.Released || again.HoldCount != r.HoldCount) {
					m.fail("a retried ReleaseRequest reports the first one's outcome", n, []string{field()},
						"first: released %v count %d; again: released %v count %d", r.Released, r.HoldCount, again.Released, again.HoldCount)
				}
				// While the owner still holds (by the first answer's
				// count; its holds may have been lost since it learnt of
				// them), the first outcome, not a refusal (red-team
				// finding RT12-2).
				if again.Error.GetCode() == messages.ErrorCode_ERROR_CODE_NOT_OWNER && r.HoldCount > 0 && oa.lostBefore == lostAtFirst {
					m.fail("a retried ReleaseRequest reports the first one's outcome", n, []string{field()},
						"first: released %v count %d; again: %v", r.Released, r.HoldCount, again.Error)
				}
			}
			m.mu.Unlock()
		}
		if fencing != 0 && r.HoldCount > 0 && wk.rng.IntN(6) == 0 {
			// The id of the acquisition just released, used again: a new
			// acquisition; sent again, that new one's answer (red-team
			// findings RT11-2, RT12-1).
			if !wk.reusedID(n, field, step, oa, &grants, gone.req, gone.token) {
				break
			}
		}
	}
}

// knownGrant is an acquisition by message the client knows of: its
// fencing token, and the request that got it.
type knownGrant struct {
	token int64
	req   *messages.AcquireRequest
}

// lostAnswer: the client never saw the answer to its newest acquisition
// (grants' last), releases the newest it knows of by name, and sends the
// lost request again, which must get its first answer. It reports whether
// the owner holds what grants says.
func (wk *worker) lostAnswer(n *nameState, field func() string, step func(any, string) any, oa *ownerActor, grants *[]knownGrant, kind messages.Kind) bool {
	m := wk.w.model
	// Lost as the lost answer was passed on: a LockLost that comes while
	// the release runs (a force-unlock, say) explains a new grant too.
	lostBefore := oa.lostBefore
	g := *grants
	lost, known := g[len(g)-1], g[len(g)-2]
	rel := &messages.ReleaseRequest{RequestId: fmt.Sprintf("w%d-%d", wk.id, wk.rng.Uint64()), Name: n.name, Kind: kind, FencingToken: known.token}
	r, _ := step(msgRelease{req: rel}, "message release of the known one").(*messages.ReleaseResponse)
	if r == nil || r.Error != nil {
		return false
	}
	*grants = append(g[:len(g)-2:len(g)-2], lost)
	again, _ := step(msgAcquire{req: proto.Clone(lost.req).(*messages.AcquireRequest)}, "message acquire again after a release").(*messages.AcquireResponse)
	if again == nil || !again.Acquired {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n.record(wk.id, "message acquire again after releasing token %d -> token %d count %d (first: token %d)", known.token, again.FencingToken, again.HoldCount, lost.token)
	if again.FencingToken != lost.token {
		if oa.lost.Load() == lostBefore {
			m.fail("a retried AcquireRequest gets the first answer while its acquisition is held", n, []string{field()},
				"the client released token %d by name, then sent the request of token %d again: token %d count %d", known.token, lost.token, again.FencingToken, again.HoldCount)
		}
		*grants = append(*grants, knownGrant{again.FencingToken, lost.req})
	}
	return true
}

// reusedID sends the request of an acquisition just released (token
// gone) again, as a client reusing its id would: a new acquisition, and
// sent once more, that new one's answer.
func (wk *worker) reusedID(n *nameState, field func() string, step func(any, string) any, oa *ownerActor, grants *[]knownGrant, req *messages.AcquireRequest, gone int64) bool {
	m := wk.w.model
	lostBefore := oa.lost.Load()
	first, _ := step(msgAcquire{req: proto.Clone(req).(*messages.AcquireRequest)}, "message acquire with a reused id").(*messages.AcquireResponse)
	if first == nil || !first.Acquired {
		return false
	}
	*grants = append(*grants, knownGrant{first.FencingToken, req})
	again, _ := step(msgAcquire{req: proto.Clone(req).(*messages.AcquireRequest)}, "message acquire with a reused id again").(*messages.AcquireResponse)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case first.FencingToken == gone:
		m.fail("an acquisition id used again after its grant was released acquires anew", n, []string{field()},
			"answered with the released grant's token %d", gone)
	case again == nil || !again.Acquired:
		return false
	case again.FencingToken != first.FencingToken && oa.lost.Load() == lostBefore:
		m.fail("a retried AcquireRequest gets the first answer while its acquisition is held", n, []string{field()},
			"a reused id answered with token %d, sent again: token %d", first.FencingToken, again.FencingToken)
	}
	n.record(wk.id, "message acquire with a reused id -> token %d, again token %d (released: %d)", first.FencingToken, again.GetFencingToken(), gone)
	return true
}

// unreachableOwner: an AcquireRequest from an owner actor of another node
// that never answers and never sends a RenewRequest (its address leads
// nowhere: replies and the runtime's Watch go to dead letters, which
// report it terminated). A remote owner that stops proving it is alive
// loses its hold within a watchdog lease (README, remote actors): the
// hold must leave Redis within that lease, plus a call timeout for the
// release (or, if every try of it fails, the lease it was last renewed
// for), plus the tolerance.
func (wk *worker) unreachableOwner(rt *actorlock.Runtime, n *nameState, kind messages.Kind) {
	m, c := wk.w.model, wk.w.cfg
	var raw [16]byte
	for i := range raw {
		raw[i] = byte(wk.rng.IntN(256))
	}
	token := hex.EncodeToString(raw[:])
	owner, err := actorkit.TokenOwner(rt, token)
	if err != nil {
		m.mu.Lock()
		m.fail("a well-formed owner token names an owner", n, nil, "TokenOwner(%s): %v", token, err)
		m.mu.Unlock()
		return
	}
	field := owner
	if kind == messages.Kind_KIND_WRITE {
		field += ":write"
	}
	wait := time.Duration(wk.rng.IntN(200)) * time.Millisecond
	req := &messages.AcquireRequest{RequestId: fmt.Sprintf("ghost-%d-%d", wk.id, wk.rng.Uint64()), Name: n.name, Kind: kind,
		WaitMs: wait.Milliseconds(), OwnerToken: token}
	ghost := actor.NewPID("192.0.2.1:9", fmt.Sprintf("sim-ghost-%d", wk.id)) // TEST-NET-1: no node there
	m.opStart(n, field)
	defer m.opEnd(n, field)
	m.mu.Lock()
	n.record(wk.id, "message acquire from an unreachable remote owner %s, wait %v", short(owner), wait)
	m.mu.Unlock()
	actorkit.System(rt).Root.RequestWithCustomSender(actorkit.PID(rt), req, ghost)

	// Follow the owner's field in Redis: it appears if granted, and must
	// be gone within the bound after.
	bound := c.watchdog + c.callTimeout + c.maxLease() + c.tol
	start := time.Now()
	var grantedAt time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		held, err := wk.w.admin.HExists(ctx, n.name, field).Result()
		cancel()
		now := time.Now()
		switch {
		case err != nil && !errors.Is(err, redis.Nil):
			// Redis restarting: look again.
		case held && grantedAt.IsZero():
			grantedAt = now
		case !held && !grantedAt.IsZero():
			m.mu.Lock()
			n.record(wk.id, "the unreachable owner's hold left Redis after %.3fs", now.Sub(grantedAt).Seconds())
			m.mu.Unlock()
			return
		case !held && now.Sub(start) > wait+c.callTimeout+c.tol:
			return // never granted (its answer went to dead letters)
		}
		if !grantedAt.IsZero() && now.Sub(grantedAt) > bound {
			m.mu.Lock()
			m.fail("a remote owner that never renews loses its hold within a watchdog lease", n, []string{field},
				"held %.3fs after its grant, bound %v", now.Sub(grantedAt).Seconds(), bound)
			m.mu.Unlock()
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-wk.w.ctx.Done():
			return // quiescence: Close releases it
		}
	}
}
