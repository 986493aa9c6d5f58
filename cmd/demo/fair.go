package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The fair-lock job runner: owner actors of this node lock jobs with
// another node's runtime, by message over protoactor remote.
const (
	fairWait    = 4 * time.Second // AcquireRequest.wait_ms
	replyMargin = 2 * time.Second // on top of the wait: no reply by then, the peer is given up on
	releaseWait = 5 * time.Second
)

// bridge is an owner actor driven by a goroutine: the goroutine has it
// send requests (so that the actor is their sender, and the owner the
// runtime watches), and gets the responses through replies.
type bridge struct {
	n       *node
	sys     *actor.ActorSystem
	pid     *actor.PID
	replies chan proto.Message
}

// send is a request for the bridge actor to send with Context.Request.
type send struct {
	to  *actor.PID
	msg proto.Message
}

type bridgeActor struct {
	b      *bridge
	keeper *actor.PID
}

func (a *bridgeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A child: it stops with the owner, and with it the renewals.
		a.keeper = ctx.Spawn(actorkit.KeeperProps())
	case *send:
		ctx.Request(m.to, m.msg)
	case *actorkit.Keep:
		ctx.Send(a.keeper, m)
	case *actorkit.Unkeep:
		ctx.Send(a.keeper, m)
	case *messages.AcquireResponse, *messages.ReleaseResponse, *messages.CancelResponse:
		select {
		case a.b.replies <- m.(proto.Message):
		default: // nobody waits for it any more
		}
	case *messages.LockLost:
		a.b.n.em.emit(event{T: "lost", L: []string{m.Name}, Msg: m.Reason})
	case *messages.RenewResponse:
		// The keeper forwards a refused renewal: the lock is gone.
		a.b.n.em.emit(event{T: "lost", Msg: "renewal refused: " + m.GetError().GetMessage()})
	}
}

func (n *node) newBridge() *bridge {
	b := &bridge{n: n, sys: actorkit.System(n.rt), replies: make(chan proto.Message, 16)}
	b.pid = b.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &bridgeActor{b: b} }))
	return b
}

func (b *bridge) request(to *actor.PID, msg proto.Message) {
	b.sys.Root.Send(b.pid, &send{to: to, msg: msg})
}

// await waits for the response to request id. why is "" when it came,
// else "ctx", "dead" (the peer was killed) or "timeout".
func (b *bridge) await(ctx context.Context, id string, timeout time.Duration, dead <-chan struct{}) (resp proto.Message, why string) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case m := <-b.replies:
			if responseID(m) == id {
				return m, ""
			}
		case <-dead:
			return nil, "dead"
		case <-t.C:
			return nil, "timeout"
		case <-ctx.Done():
			return nil, "ctx"
		}
	}
}

func responseID(m proto.Message) string {
	switch r := m.(type) {
	case *messages.AcquireResponse:
		return r.RequestId
	case *messages.ReleaseResponse:
		return r.RequestId
	case *messages.CancelResponse:
		return r.RequestId
	}
	return ""
}

// fairOwner runs jobs: it picks a job, locks it with the next live node's
// runtime (a fair lock: waiters in arrival order, across nodes), keeps it
// alive with a keeper, runs the job, releases it.
func (n *node) fairOwner(ctx context.Context, o int) {
	b := n.newBridge()
	defer b.sys.Root.Stop(b.pid)
	skip := -1 // a peer that did not answer in time: the next request goes elsewhere
	for seq := 1; ctx.Err() == nil; seq++ {
		k := rand.IntN(n.cfg.jobs)
		if n.cfg.unsafe {
			n.unsafeJob(ctx, k)
			continue
		}
		target := n.peers.pick(skip)
		skip = -1
		runtime := actor.NewPID(n.peers.addrs[target], actorkit.DefaultRemoteName)
		name := jobLock(k)
		token := actorkit.NewOwnerToken()
		reqID := fmt.Sprintf("acq-%d-%d-%d", n.idx, o, seq)
		asked := time.Now()
		n.waiting.Add(1)
		b.request(runtime, &messages.AcquireRequest{
			RequestId: reqID, Name: name, Kind: messages.Kind_KIND_FAIR,
			WaitMs: fairWait.Milliseconds(), OwnerToken: token,
		})
		resp, why := b.await(ctx, reqID, fairWait+replyMargin, n.peers.dead[target])
		n.waiting.Add(-1)
		if why != "" {
			if why != "dead" {
				// Whatever it may have granted meanwhile is given back.
				b.request(runtime, &messages.CancelRequest{RequestId: reqID, Name: name, Kind: messages.Kind_KIND_FAIR, OwnerToken: token})
			}
			if why != "ctx" {
				n.em.emit(event{T: "switch", N: int64(target)})
				skip = target
			}
			continue
		}
		ar := resp.(*messages.AcquireResponse)
		if !ar.Acquired {
			switch code := ar.GetError().GetCode(); {
			case code == messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED:
				n.em.emit(event{T: "timeout", Kind: kindFair})
			case n.peers.isDead(target):
			default:
				n.fail("fair acquire", fmt.Errorf("node %d: %v: %s", target, code, ar.GetError().GetMessage()))
				sleepCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		id := n.enter(kindFair, []string{name}, []int64{ar.FencingToken}, asked)
		b.sys.Root.Send(b.pid, &actorkit.Keep{Runtime: runtime, Name: name, Kind: messages.Kind_KIND_FAIR,
			OwnerToken: token, Lease: time.Duration(ar.TtlMs) * time.Millisecond})
		sctx, cancel := sectionCtx(ctx)
		wrote, err := n.runJob(sctx, k)
		n.leave(id, wrote)
		if err != nil {
			n.fail("job", err)
		}
		b.sys.Root.Send(b.pid, &actorkit.Unkeep{Runtime: runtime, Name: name, Kind: messages.Kind_KIND_FAIR, OwnerToken: token})
		relID := fmt.Sprintf("rel-%d-%d-%d", n.idx, o, seq)
		b.request(runtime, &messages.ReleaseRequest{RequestId: relID, Name: name, Kind: messages.Kind_KIND_FAIR, OwnerToken: token})
		resp, why = b.await(sctx, relID, releaseWait, n.peers.dead[target])
		cancel()
		switch {
		case why == "dead":
			// Its locks die with it, after the lease.
		case why != "":
			n.fail("fair release", fmt.Errorf("node %d: no answer (%s)", target, why))
		case resp.(*messages.ReleaseResponse).GetError() != nil && !n.peers.isDead(target):
			e := resp.(*messages.ReleaseResponse).GetError()
			n.fail("fair release", fmt.Errorf("node %d: %v: %s", target, e.GetCode(), e.GetMessage()))
		}
	}
}

// runJob is the job: a counter incremented the racy way (GET, work, SET),
// which loses increments unless the lock excludes.
func (n *node) runJob(ctx context.Context, k int) (bool, error) {
	v, err := n.rdb.Get(ctx, jobCounter(k)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	time.Sleep(jobHold)
	err = n.rdb.Set(ctx, jobCounter(k), v+1, 0).Err()
	return err == nil, err
}

// unsafeJob is a job without the lock (--unsafe).
func (n *node) unsafeJob(ctx context.Context, k int) {
	asked := time.Now()
	e, err := n.unsafeEntry(ctx, []string{jobLock(k)})
	if !n.acquired(ctx, kindFair, err) {
		return
	}
	id := n.enter(kindFair, []string{jobLock(k)}, e.toks, asked)
	sctx, cancel := sectionCtx(ctx)
	defer cancel()
	wrote, err := n.runJob(sctx, k)
	n.leave(id, wrote)
	if err != nil {
		n.fail("job", err)
	}
}
