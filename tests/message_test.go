package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/messages"
)

// probe is an actor the test drives: it sends what it is told to send with
// Context.Request (so it is the sender and owner) and passes on every
// protobuf message it receives.
type probe struct {
	pid   *actor.PID
	inbox chan proto.Message
}

type sendTo struct {
	to  *actor.PID
	msg proto.Message
}

func spawnProbe(t *testing.T, sys *actor.ActorSystem) *probe {
	t.Helper()
	p := &probe{inbox: make(chan proto.Message, 64)}
	p.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *sendTo:
			ctx.Request(m.to, m.msg)
		case proto.Message:
			p.inbox <- m
		}
	}))
	t.Cleanup(func() { sys.Root.Stop(p.pid) })
	return p
}

func (p *probe) send(sys *actor.ActorSystem, to *actor.PID, msg proto.Message) {
	sys.Root.Send(p.pid, &sendTo{to: to, msg: msg})
}

func receive[T proto.Message](t *testing.T, p *probe, within time.Duration) T {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-p.inbox:
			if v, ok := m.(T); ok {
				return v
			}
		case <-deadline:
			var zero T
			t.Fatalf("no %T within %v", zero, within)
			return zero
		}
	}
}

func TestActorAcquiresByMessageAndOwnsTheLock(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithWatchdog(time.Second))
	ctx := ctxFor(t, 20*time.Second)
	sys := rt.ActorSystem()
	owner, intruder := spawnProbe(t, sys), spawnProbe(t, sys)

	owner.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: "a1", Name: "by-message", Kind: messages.Kind_KIND_LOCK, WaitMs: 1000})
	resp := receive[*messages.AcquireResponse](t, owner, 3*time.Second)
	require.True(t, resp.Acquired, "%v", resp.Error)
	assert.Equal(t, "a1", resp.RequestId)
	assert.Positive(t, resp.FencingToken)
	assert.EqualValues(t, 1, resp.HoldCount)

	fields, err := rdb.HGetAll(ctx, "by-message").Result()
	require.NoError(t, err)
	require.Len(t, fields, 1)
	var ownerID string
	for k := range fields {
		ownerID = k
	}
	assert.True(t, strings.HasPrefix(ownerID, rt.ID()+":"), "the owner is the requesting actor: %s", ownerID)

	// Another actor cannot release it, neither as itself nor naming the owner.
	intruder.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "r1", Name: "by-message", Kind: messages.Kind_KIND_LOCK})
	rel := receive[*messages.ReleaseResponse](t, intruder, 3*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode())
	intruder.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "r2", Name: "by-message", Kind: messages.Kind_KIND_LOCK, Owner: ownerID})
	rel = receive[*messages.ReleaseResponse](t, intruder, 3*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode())
	// Nor take it over by naming the owner (that would be a re-entry).
	intruder.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: "a2", Name: "by-message", Kind: messages.Kind_KIND_LOCK, Owner: ownerID})
	resp = receive[*messages.AcquireResponse](t, intruder, 3*time.Second)
	assert.False(t, resp.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, resp.GetError().GetCode())
	n, err := rdb.HGet(ctx, "by-message", ownerID).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the holder is untouched")

	// Held past the watchdog lease: renewed while the actor lives.
	time.Sleep(1500 * time.Millisecond)
	n, err = rdb.HGet(ctx, "by-message", ownerID).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// The owner actor stops: its lock is released.
	sys.Root.Stop(owner.pid)
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "by-message").Val() == 0 }, 2*time.Second, 10*time.Millisecond)
}

func TestActorReleasesReentersAndIsToldOfLoss(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithWatchdog(900*time.Millisecond))
	ctx := ctxFor(t, 20*time.Second)
	sys := rt.ActorSystem()
	p := spawnProbe(t, sys)

	acquire := func(id string) *messages.AcquireResponse {
		p.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: id, Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK})
		return receive[*messages.AcquireResponse](t, p, 3*time.Second)
	}
	r1, r2 := acquire("1"), acquire("2")
	require.True(t, r1.Acquired)
	require.True(t, r2.Acquired, "re-entry by the same actor")
	assert.EqualValues(t, 2, r2.HoldCount)
	assert.Greater(t, r2.FencingToken, r1.FencingToken)

	p.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "3", Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK})
	rel := receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	require.Nil(t, rel.Error)
	assert.False(t, rel.Released)
	assert.EqualValues(t, 1, rel.HoldCount)

	require.NoError(t, rdb.Del(ctx, "msg-reentrant").Err())
	lost := receive[*messages.LockLost](t, p, 900*time.Millisecond/3+time.Second)
	assert.Equal(t, "msg-reentrant", lost.Name)
	assert.Equal(t, r1.FencingToken, lost.FencingToken, "the release took the newest hold; the first one was lost")

	p.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "4", Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK})
	rel = receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode(), "nothing left to release")
}

func TestActorCancelsAWaitingRequest(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := rt.ActorSystem()
	h, err := rt.Lock("msg-cancel").Acquire(ctx)
	require.NoError(t, err)
	p := spawnProbe(t, sys)
	p.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: "w", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, WaitIndefinitely: true})
	time.Sleep(100 * time.Millisecond)
	p.send(sys, rt.PID(), &messages.CancelRequest{RequestId: "w", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK})
	resp := receive[*messages.AcquireResponse](t, p, 2*time.Second)
	assert.False(t, resp.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_CANCELED, resp.GetError().GetCode())

	// A timed wait ends with NOT_ACQUIRED.
	p.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: "t", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, WaitMs: 300})
	resp = receive[*messages.AcquireResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED, resp.GetError().GetCode())

	require.NoError(t, h.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "msg-cancel").Val(), "the cancelled waiter took nothing")
}

func TestInvalidMessagesGetErrorResponses(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	sys := rt.ActorSystem()
	p := spawnProbe(t, sys)
	for _, req := range []*messages.AcquireRequest{
		{RequestId: "1", Name: "", Kind: messages.Kind_KIND_LOCK},
		{RequestId: "2", Name: strings.Repeat("n", 64<<10+1), Kind: messages.Kind_KIND_LOCK},
		{RequestId: "3", Name: "x", Kind: messages.Kind_KIND_UNSPECIFIED},
		{RequestId: "4", Name: "x", Kind: messages.Kind(99)},
		{RequestId: "5", Name: "x", Kind: messages.Kind_KIND_LOCK, WaitMs: -1},
		{RequestId: "6", Name: "x", Kind: messages.Kind_KIND_LOCK, LeaseMs: -5},
		{RequestId: "7", Name: "x", Kind: messages.Kind_KIND_LOCK, WaitMs: 10, WaitIndefinitely: true},
		{RequestId: "8", Name: "x", Kind: messages.Kind_KIND_LOCK, Owner: strings.Repeat("o", 2000)},
		{RequestId: "", Name: "x", Kind: messages.Kind_KIND_LOCK},
	} {
		p.send(sys, rt.PID(), req)
		resp := receive[*messages.AcquireResponse](t, p, 2*time.Second)
		assert.False(t, resp.Acquired)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, resp.GetError().GetCode(), "request %q", req.RequestId)
		assert.Equal(t, req.RequestId, resp.RequestId)
	}
	// Releases and cancels of names nobody holds spawn nothing.
	p.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "r", Name: "never-held", Kind: messages.Kind_KIND_LOCK})
	rel := receive[*messages.ReleaseResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode())
	p.send(sys, rt.PID(), &messages.ReleaseRequest{RequestId: "", Name: "never-held", Kind: messages.Kind_KIND_LOCK})
	rel = receive[*messages.ReleaseResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, rel.GetError().GetCode())
	p.send(sys, rt.PID(), &messages.CancelRequest{RequestId: "c", Name: "never-held", Kind: messages.Kind_KIND_LOCK})
	// Without a sender nobody can be answered or own anything: dropped.
	sys.Root.Send(rt.PID(), &messages.AcquireRequest{RequestId: "x", Name: "x", Kind: messages.Kind_KIND_LOCK})
	st, err := rt.Stats(ctxFor(t, time.Second))
	require.NoError(t, err)
	assert.Zero(t, st.LockActors)
}
