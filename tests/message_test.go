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
	"github.com/actorlock/actorlock/actorkit"
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

// ask sends req from p to rt's lock protocol and returns its answer (3 s
// at most).
func ask[T proto.Message](t *testing.T, rt *actorlock.Runtime, p *probe, req proto.Message) T {
	t.Helper()
	p.send(actorkit.System(rt), actorkit.PID(rt), req)
	return receive[T](t, p, 3*time.Second)
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
	sys := actorkit.System(rt)
	owner, intruder := spawnProbe(t, sys), spawnProbe(t, sys)

	owner.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a1", Name: "by-message", Kind: messages.Kind_KIND_LOCK, WaitMs: 1000})
	resp := receive[*messages.AcquireResponse](t, owner, 3*time.Second)
	require.True(t, resp.Acquired, "%v", resp.Error)
	assert.Equal(t, "a1", resp.RequestId)
	assert.Positive(t, resp.FencingToken)
	assert.EqualValues(t, 1, resp.HoldCount)
	token := resp.OwnerToken
	require.Regexp(t, "^[0-9a-f]{32}$", token, "128 random bits")

	fields, err := rdb.HGetAll(ctx, "by-message").Result()
	require.NoError(t, err)
	fields = ownersOf(fields)
	require.Len(t, fields, 1)
	var ownerID string
	for k := range fields {
		ownerID = k
	}
	want, err := actorkit.TokenOwner(rt, token)
	require.NoError(t, err)
	assert.Equal(t, want, ownerID, "the owner in Redis is the token's")
	assert.Equal(t, ownerID, resp.Owner)
	assert.True(t, strings.HasPrefix(ownerID, rt.ID()+":"), "an owner of this runtime: %s", ownerID)
	assert.NotContains(t, ownerID, token, "the token itself is not stored")

	// Another actor cannot release it: not without the token, not with
	// another one, and naming the owner id is refused outright.
	for i, req := range []*messages.ReleaseRequest{
		{RequestId: "r1", Name: "by-message", Kind: messages.Kind_KIND_LOCK},
		{RequestId: "r2", Name: "by-message", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()},
		{RequestId: "r3", Name: "by-message", Kind: messages.Kind_KIND_LOCK, Owner: ownerID},
	} {
		intruder.send(sys, actorkit.PID(rt), req)
		rel := receive[*messages.ReleaseResponse](t, intruder, 3*time.Second)
		want := messages.ErrorCode_ERROR_CODE_NOT_OWNER
		if i == 2 {
			want = messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT
		}
		assert.Equal(t, want, rel.GetError().GetCode(), "release %s", req.RequestId)
		assert.NotContains(t, rel.GetError().GetMessage(), token)
	}
	// Nor take it over: naming the owner is refused, and another token is
	// another owner, which finds the lock taken.
	//lint:ignore SA1019 the deprecated field must be refused
	intruder.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a2", Name: "by-message", Kind: messages.Kind_KIND_LOCK, Owner: ownerID})
	resp = receive[*messages.AcquireResponse](t, intruder, 3*time.Second)
	assert.False(t, resp.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, resp.GetError().GetCode())
	intruder.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a3", Name: "by-message", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()})
	resp = receive[*messages.AcquireResponse](t, intruder, 3*time.Second)
	assert.False(t, resp.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED, resp.GetError().GetCode())
	n, err := rdb.HGet(ctx, "by-message", ownerID).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the holder is untouched")

	// Held past the watchdog lease: renewed while the actor lives (an actor
	// of the runtime's own process needs no RenewRequest).
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
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)

	acquire := func(id, token string) *messages.AcquireResponse {
		p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: id, Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
		return receive[*messages.AcquireResponse](t, p, 3*time.Second)
	}
	r1 := acquire("1", "")
	require.True(t, r1.Acquired)
	r2 := acquire("2", r1.OwnerToken)
	require.True(t, r2.Acquired, "re-entry by the owner (its token)")
	assert.Equal(t, r1.OwnerToken, r2.OwnerToken)
	assert.EqualValues(t, 2, r2.HoldCount)
	assert.Greater(t, r2.FencingToken, r1.FencingToken)
	token := r1.OwnerToken

	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "3", Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	rel := receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	require.Nil(t, rel.Error)
	assert.False(t, rel.Released)
	assert.EqualValues(t, 1, rel.HoldCount)

	require.NoError(t, rdb.Del(ctx, "msg-reentrant").Err())
	lost := receive[*messages.LockLost](t, p, 900*time.Millisecond/3+time.Second)
	assert.Equal(t, "msg-reentrant", lost.Name)
	assert.Equal(t, r1.FencingToken, lost.FencingToken, "the release took the newest hold; the first one was lost")

	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "4", Name: "msg-reentrant", Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	rel = receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode(), "nothing left to release")
}

func TestActorCancelsAWaitingRequest(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	h, err := rt.Lock("msg-cancel").Acquire(ctx)
	require.NoError(t, err)
	p, other := spawnProbe(t, sys), spawnProbe(t, sys)
	// The requester chooses its token, so it can cancel before any response.
	token := actorkit.NewOwnerToken()
	p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "w", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, WaitIndefinitely: true, OwnerToken: token})
	time.Sleep(100 * time.Millisecond)
	// Only with that token: without it, or with another, the wait goes on.
	for _, tok := range []string{"", actorkit.NewOwnerToken()} {
		other.send(sys, actorkit.PID(rt), &messages.CancelRequest{RequestId: "w", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, OwnerToken: tok})
		c := receive[*messages.CancelResponse](t, other, 2*time.Second)
		assert.False(t, c.Canceled)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, c.GetError().GetCode())
	}
	select {
	case m := <-p.inbox:
		t.Fatalf("the waiter was answered: %v", m)
	case <-time.After(100 * time.Millisecond):
	}
	other.send(sys, actorkit.PID(rt), &messages.CancelRequest{RequestId: "w", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	assert.True(t, receive[*messages.CancelResponse](t, other, 2*time.Second).Canceled, "the token is the proof, whoever sends it")
	resp := receive[*messages.AcquireResponse](t, p, 2*time.Second)
	assert.False(t, resp.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_CANCELED, resp.GetError().GetCode())

	// A timed wait ends with NOT_ACQUIRED.
	p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "t", Name: "msg-cancel", Kind: messages.Kind_KIND_LOCK, WaitMs: 300})
	resp = receive[*messages.AcquireResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED, resp.GetError().GetCode())

	require.NoError(t, h.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "msg-cancel").Val(), "the cancelled waiter took nothing")
}

func TestInvalidMessagesGetErrorResponses(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	sys := actorkit.System(rt)
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
		{RequestId: "9", Name: "x", Kind: messages.Kind_KIND_LOCK, Owner: "someone"},
		{RequestId: "10", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: "abc"},
		{RequestId: "11", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: strings.Repeat("a", 31)},
		{RequestId: "12", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: strings.Repeat("a", 33)},
		{RequestId: "13", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: strings.Repeat("g", 32)},
		{RequestId: "14", Name: "x", Kind: messages.Kind_KIND_LOCK, LeaseMs: 1 << 62},
		{RequestId: "15", Name: "x", Kind: messages.Kind_KIND_LOCK, WaitMs: 1 << 62},
		{RequestId: "16", Name: "x", Kind: messages.Kind_KIND_LOCK, LeaseMs: 5}, // under MinLease
		{RequestId: strings.Repeat("i", 257), Name: "x", Kind: messages.Kind_KIND_LOCK},
	} {
		p.send(sys, actorkit.PID(rt), req)
		resp := receive[*messages.AcquireResponse](t, p, 2*time.Second)
		assert.False(t, resp.Acquired)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, resp.GetError().GetCode(), "request %.20q", req.RequestId)
		if len(req.RequestId) <= 256 {
			assert.Equal(t, req.RequestId, resp.RequestId)
		} else {
			assert.Empty(t, resp.RequestId, "an oversized id is not sent back")
		}
		if req.OwnerToken != "" {
			assert.NotContains(t, resp.GetError().GetMessage(), req.OwnerToken, "a token is never echoed")
		}
	}
	// Releases, renewals and cancels with a malformed token, or naming an owner.
	bad := strings.Repeat("z", 32)
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "b1", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: bad})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.ReleaseResponse](t, p, 2*time.Second).GetError().GetCode())
	//lint:ignore SA1019 the deprecated field must be refused
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "b2", Name: "x", Kind: messages.Kind_KIND_LOCK, Owner: "someone"})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.ReleaseResponse](t, p, 2*time.Second).GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.RenewRequest{RequestId: "b3", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: bad})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.RenewResponse](t, p, 2*time.Second).GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.CancelRequest{RequestId: "b4", Name: "x", Kind: messages.Kind_KIND_LOCK, OwnerToken: bad})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.CancelResponse](t, p, 2*time.Second).GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.RenewRequest{RequestId: "b5", Name: "", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.RenewResponse](t, p, 2*time.Second).GetError().GetCode())
	// Queue messages are bounded too: an oversized payload.
	p.send(sys, actorkit.PID(rt), &messages.OfferRequest{RequestId: "o", Name: "q", Payload: make([]byte, 1<<20+1)})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, receive[*messages.OfferResponse](t, p, 2*time.Second).GetError().GetCode())
	// Releases and cancels of names nobody holds spawn nothing.
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r", Name: "never-held", Kind: messages.Kind_KIND_LOCK})
	rel := receive[*messages.ReleaseResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "", Name: "never-held", Kind: messages.Kind_KIND_LOCK})
	rel = receive[*messages.ReleaseResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, rel.GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r", Name: "never-held", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()})
	rel = receive[*messages.ReleaseResponse](t, p, 2*time.Second)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.CancelRequest{RequestId: "c", Name: "never-held", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, receive[*messages.CancelResponse](t, p, 2*time.Second).GetError().GetCode())
	p.send(sys, actorkit.PID(rt), &messages.RenewRequest{RequestId: "n", Name: "never-held", Kind: messages.Kind_KIND_LOCK, OwnerToken: actorkit.NewOwnerToken()})
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, receive[*messages.RenewResponse](t, p, 2*time.Second).GetError().GetCode())
	// Without a sender nobody can be answered or own anything: dropped.
	sys.Root.Send(actorkit.PID(rt), &messages.AcquireRequest{RequestId: "x", Name: "x", Kind: messages.Kind_KIND_LOCK})
	st, err := rt.Stats(ctxFor(t, time.Second))
	require.NoError(t, err)
	assert.Zero(t, st.LockActors)
}

// A future (RequestFuture) completes on the first message it gets. The
// runtime watches whoever waits or holds, and that watch, a system message,
// reached the future first: the requester got an *actor.Watch for its
// answer, its permit or item or lock handed to nobody who knew. Such a
// request is now refused, and the refusal is the answer.
func TestRequestsThatWaitRefuseAFutureAsTheirSender(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	for _, req := range []proto.Message{
		&messages.AcquireRequest{RequestId: "f1", Name: "by-future", Kind: messages.Kind_KIND_LOCK},
		&messages.TakeRequest{RequestId: "f2", Name: "by-future-q", WaitMs: 100},
		&messages.SemaphoreAcquireRequest{RequestId: "f3", Name: "by-future-s", Permits: 1},
	} {
		res, err := sys.Root.RequestFuture(actorkit.PID(rt), req, 5*time.Second).Result()
		require.NoError(t, err)
		resp, ok := res.(interface{ GetError() *messages.Error })
		require.True(t, ok, "%T answered with %T", req, res)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, resp.GetError().GetCode(), "%T", req)
		assert.Contains(t, resp.GetError().GetMessage(), "RequestFuture")
	}
	n, err := rdb.Exists(ctx, "by-future").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was acquired for the future")
}
