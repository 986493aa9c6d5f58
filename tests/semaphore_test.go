package tests

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// Acquire(2) with one permit available waits until a second is added.
func TestSemaphoreAcquireWaitsForEnoughPermits(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	s := rt.Semaphore("sem-wait")
	set, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, set)
	set, err = s.TrySetPermits(ctx, 5)
	require.NoError(t, err)
	assert.False(t, set, "already set")

	got := make(chan time.Time, 1)
	go func() {
		if assert.NoError(t, rt.Semaphore("sem-wait").Acquire(ctx, 2)) {
			got <- time.Now()
		}
	}()
	select {
	case <-got:
		t.Fatal("acquired 2 permits with 1 available")
	case <-time.After(1500 * time.Millisecond): // past a recheck too
	}
	// Another client adds the permit, as Redisson's release does.
	added := time.Now()
	require.NoError(t, rt.Semaphore("sem-wait").AddPermits(ctx, 1))
	select {
	case at := <-got:
		t.Logf("woken %v after the permit was added", at.Sub(added))
		assert.Less(t, at.Sub(added), 100*time.Millisecond)
	case <-time.After(3 * time.Second):
		t.Fatal("not woken by the added permit")
	}
	n, err := rdb.Get(ctx, "sem-wait").Int()
	require.NoError(t, err)
	assert.Zero(t, n)

	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, s.Release(ctx, 3))
	avail, err := s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, avail)
	ok, err = s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, ok)
	drained, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, drained)
	require.NoError(t, s.AddPermits(ctx, -2))
	avail, err = s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, -2, avail, "AddPermits may go negative")
	drained, err = s.Drain(ctx)
	require.NoError(t, err)
	assert.Zero(t, drained)

	assert.ErrorIs(t, s.Acquire(ctx, -1), actorlock.ErrInvalidArgument)
	assert.ErrorIs(t, s.Release(ctx, -1), actorlock.ErrInvalidArgument)
	_, err = s.TryAcquire(ctx, -1)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	assert.ErrorIs(t, rt.Semaphore("").Acquire(ctx, 1), actorlock.ErrInvalidArgument)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Acquire(cctx, 1), context.DeadlineExceeded)
}

// A semaphore of one permit is a mutex: 16 owners in 4 processes doing 100
// unprotected read-modify-writes each lose no update, and their critical
// sections never overlap.
func TestSemaphoreMutexAcrossProcesses(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 2*time.Minute)
	ok, err := rt.Semaphore("sem-mutex").TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	const procs, owners, iters = 4, 4, 100
	var ws []*worker
	for range procs {
		ws = append(ws, spawn(t, "sem-mutex", map[string]string{
			"REDIS_ADDR": srv.Addr, "SEMAPHORE": "sem-mutex", "COUNTER_KEY": "sem-counter",
			"OWNERS": fmt.Sprint(owners), "ITERS": fmt.Sprint(iters),
		}))
	}
	type span struct{ start, end int64 }
	var spans []span
	for _, w := range ws {
		for _, line := range w.wait(t, 90*time.Second) {
			if rest, ok := strings.CutPrefix(line, "SECTION "); ok {
				f := strings.Fields(rest)
				s, _ := strconv.ParseInt(f[0], 10, 64)
				e, _ := strconv.ParseInt(f[1], 10, 64)
				spans = append(spans, span{s, e})
			}
		}
	}
	n, err := rdb.Get(ctx, "sem-counter").Int()
	require.NoError(t, err)
	assert.Equal(t, procs*owners*iters, n, "no update lost")
	require.Len(t, spans, procs*owners*iters)
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		require.GreaterOrEqual(t, spans[i].start, spans[i-1].end, "critical sections overlap")
	}
	avail, err := rt.Semaphore("sem-mutex").Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, avail, "every permit came back")
}

// A permit with a 2 s lease that is never released lets a blocked acquirer
// in when it expires, without any message; releasing it late reports it.
func TestExpiredPermitLetsAWaiterIn(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	s := rt.PermitExpirableSemaphore("pes")
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	start := time.Now()
	id, err := s.Acquire(ctx, 2*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	// The permit expires 2 s after Redis ran the acquire: between start and
	// now (a loaded machine under -race can take a few ms in between).
	acquired := time.Now()
	score, err := rdb.ZScore(ctx, "{pes}:timeout", permitMember(t, id)).Result()
	require.NoError(t, err, "the permit is in Redisson's timeout set")
	assert.Greater(t, score, float64(time.Now().UnixMilli()))

	_, ok, err = s.TryAcquire(ctx, time.Second)
	require.NoError(t, err)
	assert.False(t, ok)
	// Start waiting off the recheck's beat, so only a wake-up at the expiry
	// itself lands in the window.
	time.Sleep(500 * time.Millisecond)
	id2, err := rt.PermitExpirableSemaphore("pes").Acquire(ctx, 0)
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("waiter got a permit %v after the first was taken with a 2 s lease (%v after its Acquire returned)", took, time.Since(acquired))
	assert.GreaterOrEqual(t, took, 1900*time.Millisecond)
	assert.LessOrEqual(t, time.Since(acquired), 2100*time.Millisecond)
	assert.NotEqual(t, id, id2)

	assert.ErrorIs(t, s.Release(ctx, id), actorlock.ErrPermitExpired)
	require.NoError(t, s.Release(ctx, id2))
	assert.ErrorIs(t, s.Release(ctx, id2), actorlock.ErrPermitExpired, "released twice")
	avail, err := s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, avail)

	// An expired permit also returns to the pool when nobody waits.
	_, err = s.Acquire(ctx, 100*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	avail, err = s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, avail)
}

// A waiter never hangs when the release message is lost: the pub/sub
// connection is killed and the permit is added without a message.
func TestSemaphoreWaiterSurvivesALostMessage(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	got := make(chan time.Time, 1)
	go func() {
		if assert.NoError(t, rt.Semaphore("sem-lost").Acquire(ctx, 1)) {
			got <- time.Now()
		}
	}()
	waitSubscribers(t, ctx, rdb, "redisson_sc:{sem-lost}", 1)
	killed, err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Int()
	require.NoError(t, err)
	require.GreaterOrEqual(t, killed, 1)
	added := time.Now()
	require.NoError(t, rdb.IncrBy(ctx, "sem-lost", 1).Err()) // released, nobody told
	select {
	case at := <-got:
		t.Logf("woken %v after a silent release", at.Sub(added))
		assert.Less(t, at.Sub(added), 1200*time.Millisecond, "within the recheck interval")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter hung after its release message was lost")
	}
}

// Semaphores by protobuf message: acquire waits, release wakes it;
// permit-expirable permits come with an id.
func TestSemaphoreMessages(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)

	p.send(sys, actorkit.PID(rt), &messages.SemaphoreAcquireRequest{RequestId: "a1", Name: "msem", Permits: 1, WaitIndefinitely: true})
	time.Sleep(200 * time.Millisecond)
	select {
	case m := <-p.inbox:
		t.Fatalf("answered with no permit available: %v", m)
	default:
	}
	p.send(sys, actorkit.PID(rt), &messages.SemaphoreReleaseRequest{RequestId: "r1", Name: "msem", Permits: 1})
	// The woken acquire may answer before the release does: take both, in
	// either order (receive drops what it was not asked for).
	var rel *messages.SemaphoreReleaseResponse
	var acq *messages.SemaphoreAcquireResponse
	deadline := time.After(5 * time.Second)
	for rel == nil || acq == nil {
		select {
		case m := <-p.inbox:
			switch m := m.(type) {
			case *messages.SemaphoreReleaseResponse:
				rel = m
			case *messages.SemaphoreAcquireResponse:
				acq = m
			}
		case <-deadline:
			t.Fatalf("within 5 s: release response %v, acquire response %v", rel, acq)
		}
	}
	assert.True(t, rel.Released)
	assert.Equal(t, "a1", acq.RequestId)
	assert.True(t, acq.Acquired)

	p.send(sys, actorkit.PID(rt), &messages.SemaphoreAcquireRequest{RequestId: "a2", Name: "msem", Permits: 1, WaitMs: 200})
	acq = receive[*messages.SemaphoreAcquireResponse](t, p, 5*time.Second)
	assert.False(t, acq.Acquired)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED, acq.GetError().GetCode())

	_, err := rt.PermitExpirableSemaphore("mpes").TrySetPermits(ctx, 1)
	require.NoError(t, err)
	p.send(sys, actorkit.PID(rt), &messages.SemaphoreAcquireRequest{RequestId: "e1", Name: "mpes", Expirable: true, LeaseMs: 10_000})
	acq = receive[*messages.SemaphoreAcquireResponse](t, p, 5*time.Second)
	require.True(t, acq.Acquired)
	require.NotEmpty(t, acq.PermitId)
	p.send(sys, actorkit.PID(rt), &messages.SemaphoreReleaseRequest{RequestId: "e2", Name: "mpes", Expirable: true, PermitId: acq.PermitId})
	rel = receive[*messages.SemaphoreReleaseResponse](t, p, 5*time.Second)
	assert.True(t, rel.Released)
	p.send(sys, actorkit.PID(rt), &messages.SemaphoreReleaseRequest{RequestId: "e3", Name: "mpes", Expirable: true, PermitId: acq.PermitId})
	rel = receive[*messages.SemaphoreReleaseResponse](t, p, 5*time.Second)
	assert.False(t, rel.Released)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_LOST, rel.GetError().GetCode())

	for _, m := range []*messages.SemaphoreAcquireRequest{
		{RequestId: "x", Name: "msem"}, {RequestId: "", Name: "msem", Permits: 1}, {RequestId: "x", Name: "", Permits: 1},
		{RequestId: "x", Name: "msem", Permits: 1, WaitMs: -1}, {RequestId: "x", Name: "mpes", Expirable: true, Permits: 2},
		{RequestId: "x", Name: "msem", Permits: 1, LeaseMs: 5},
	} {
		p.send(sys, actorkit.PID(rt), m)
		acq = receive[*messages.SemaphoreAcquireResponse](t, p, 5*time.Second)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, acq.GetError().GetCode(), "%v", m)
	}
}

// A semaphore's count may go below zero (AddPermits takes more than there
// are), and whatever it becomes is the count, never mistaken for the
// duplicate guard's own "did nothing" answers (-8, -9): an AddPermits or
// Release that leaves -8 or -9 reports success, and acted once.
func TestSemaphoreCountMayBeAnyNegative(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	s := rt.Semaphore("sem-negative")
	require.NoError(t, s.AddPermits(ctx, -7))
	for _, want := range []int64{-8, -9, -10} {
		require.NoError(t, s.AddPermits(ctx, -1), "taking a permit to %d", want)
		n, err := s.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	require.NoError(t, s.Release(ctx, 1))
	require.NoError(t, s.Release(ctx, 1))
	n, err := rdb.Get(ctx, "sem-negative").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(-8), n, "each call acted once")
}

// A Release whose caller gives up while its command waits for a free
// flight in the runtime's batching client (every flight on the wire, held
// back here as CLIENT PAUSE WRITE would hold them) is never sent: its
// caller was told it may have run, and it must not act behind its back once
// the flights land (its deadline in Redis would still let it).
func TestSemaphoreReleaseGivenUpWhileQueuedIsNeverSent(t *testing.T) {
	t.Parallel()
	const name, other, flights = "sem-queued-release", "sem-queued-other", 4 // actors.pipelineFlights
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt := newRuntime(t, client(t, p.Addr()), actorlock.WithCallTimeout(3*time.Second))
	warmScripts(t, rt)
	ctx := ctxFor(t, 30*time.Second)
	sem := rt.Semaphore(name)
	require.NoError(t, sem.AddPermits(ctx, 10)) // the server's clock learnt too

	held := p.on(flights, holdCommand, 1500*time.Millisecond, func(c respCommand) bool { return c.scriptOn(other) })
	busy := make(chan error, flights)
	for range flights {
		go func() { busy <- rt.Semaphore(other).Release(ctx, 1) }()
	}
	for range flights {
		await(t, held.hits, 5*time.Second, "a flight held")
	}
	sent := p.on(1, delayReply, 0, func(c respCommand) bool { return c.scriptOn(name) })
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := sem.Release(short, 2)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller gave up while the release queued")
	for range flights {
		require.NoError(t, await(t, busy, 5*time.Second, "a held flight lands"))
	}
	select {
	case <-sent.hits:
		t.Fatal("the release whose caller gave up was sent")
	case <-time.After(time.Second):
	}
	n, err := direct.Get(ctx, name).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(10), n, "the release did not act")
}
