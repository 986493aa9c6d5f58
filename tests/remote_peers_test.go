package tests

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// Remote peers (child processes over protoactor remote, as in
// remote_test.go) that send what they should not: a Terminated naming
// another peer's actor, requests straight to the runtime's internal actors,
// RenewResponses to another owner's keeper; and a waiter whose connection
// breaks. Not parallel: one remote per process (see remote_test.go).

// internalIDs are the ids of the actors of rt's system but its entry
// points (the manager and the named PID): what a peer could address by
// guessing (protoactor's ids are sequential).
func internalIDs(t *testing.T, rt *actorlock.Runtime) string {
	t.Helper()
	var ids []string
	for _, bucket := range actorkit.System(rt).ProcessRegistry.LocalPIDs.LocalPIDs {
		ids = append(ids, bucket.Keys()...)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == actorkit.PID(rt).Id || id == actorkit.NamedPID(rt).Id })
	require.True(t, slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "guardian") }),
		"a supervision guardian among them (protoactor panicked on a message to one)")
	return strings.Join(ids, ",")
}

// startWaiting has a remote waiter wait for an item of "wait-q" and a
// permit of "wait-sem", and returns once both waits reached their actors.
func startWaiting(t *testing.T, rt *actorlock.Runtime, w *worker) (addr, id string) {
	t.Helper()
	pid := strings.Fields(w.expect(t, "WAITER ", 10*time.Second))
	require.Len(t, pid, 2)
	require.Eventually(t, func() bool {
		st, err := rt.Stats(context.Background())
		return err == nil && st.PrimitiveActors >= 2
	}, 5*time.Second, 10*time.Millisecond, "the queue's and the semaphore's actors wait")
	time.Sleep(200 * time.Millisecond) // and their waits began
	return pid[0], pid[1]
}

// feedWaits offers the item and the permit the waiter waits for, and
// checks that it gets both (asking again if a wait was answered meanwhile),
// and that nothing was lost or taken twice.
func feedWaits(t *testing.T, rt *actorlock.Runtime, w *worker) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, rt.BlockingQueue("wait-q").Offer(ctx, []byte("item")))
	require.NoError(t, rt.Semaphore("wait-sem").Release(ctx, 1))
	var took, acquired bool
	for !took || !acquired {
		line := w.expectLine(t, 5*time.Second, "the item and the permit", func(l string) bool {
			return strings.HasPrefix(l, "TAKE ") || strings.HasPrefix(l, "SEM ")
		})
		f := strings.Fields(line)
		switch {
		case f[0] == "TAKE" && f[2] == "true":
			assert.Equal(t, "item", f[4])
			took = true
		case f[0] == "SEM" && f[2] == "true":
			acquired = true
		default:
			// Answered without it: never silently dropped, and the
			// waiter asks again.
			assert.Equal(t, "ERROR_CODE_CANCELED", f[3], line)
		}
	}
	n, err := rt.BlockingQueue("wait-q").Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the item was taken once")
	avail, err := rt.Semaphore("wait-sem").Available(ctx)
	require.NoError(t, err)
	assert.Zero(t, avail, "the permit was acquired once")
}

// A peer forges the waiter's Terminated to every actor of the runtime: a
// wait of a remote actor is not dropped for it (the waiter would wait for
// ever); it goes on, or is answered and the waiter asks again.
func TestRemoteForgedTerminatedDropsNoWait(t *testing.T) {
	srv, _, rt := remoteSetup(t, 2*time.Second)
	w := spawn(t, "remote-waiter", remoteEnv(srv, rt, map[string]string{"QUEUE_NAME": "wait-q", "SEM_NAME": "wait-sem", "RESEND": "1"}))
	addr, id := startWaiting(t, rt, w)
	f := spawn(t, "remote-forger", remoteEnv(srv, rt, map[string]string{
		"FORGE": "terminated", "TARGET_IDS": internalIDs(t, rt), "VICTIM_ADDR": addr, "VICTIM_ID": id,
	}))
	f.expect(t, "DONE", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // the Terminateds arrive
	feedWaits(t, rt, w)
}

// The connection to a waiter's node breaks (a real Terminated, for the
// node's address): its waits are not dropped unanswered either. The
// runtime tells it, dialling its node again; the waiter asks again.
func TestRemoteWaiterWhoseConnectionBrokeIsAnswered(t *testing.T) {
	srv, _, rt := remoteSetup(t, 2*time.Second)
	port, err := redisserver.FreePort()
	require.NoError(t, err)
	toWaiter := startCutProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	w := spawn(t, "remote-waiter", remoteEnv(srv, rt, map[string]string{
		"QUEUE_NAME": "wait-q", "SEM_NAME": "wait-sem", "RESEND": "1",
		"NODE_PORT": strconv.Itoa(port), "NODE_ADVERTISED": toWaiter.Addr(),
	}))
	startWaiting(t, rt, w)
	toWaiter.Break()
	// The runtime learns that its connection broke (protoactor's endpoint
	// ends: a Terminated for the node's actors) and answers the waits.
	answered := map[string]bool{}
	for len(answered) < 2 {
		line := w.expectLine(t, 10*time.Second, "both waits answered", func(l string) bool {
			return strings.HasPrefix(l, "TAKE t1 ") || strings.HasPrefix(l, "SEM s1 ")
		})
		assert.Contains(t, line, "ERROR_CODE_CANCELED")
		answered[strings.Fields(line)[0]] = true
	}
	feedWaits(t, rt, w)
}

// A peer that learned the PIDs of the runtime's internal actors sends them
// requests straight: none is served (each is refused), so none escapes the
// key prefix (a tenant's keys), the payload bound or the minimum lease.
func TestRemoteRequestsToInternalActorsAreRefused(t *testing.T) {
	srv, rdb, rt := remoteSetup(t, 2*time.Second, actorlock.WithKeyPrefix("app:"))
	ctx := ctxFor(t, 30*time.Second)
	require.NoError(t, rdb.RPush(ctx, "other:secret", "another tenant's item").Err())
	// Live internal actors of every kind: a lock actor, a semaphore's, a
	// queue's and a delayed queue's mover.
	held, err := rt.Lock("L").Acquire(ctx)
	require.NoError(t, err)
	bq := rt.BlockingQueue("q")
	go func() { _, _ = bq.Take(ctx) }()
	dq := rt.DelayedQueue("dq")
	defer dq.Close()
	require.NoError(t, dq.Offer(ctx, []byte("later"), time.Hour))
	sem := rt.Semaphore("s")
	go func() { _ = sem.Acquire(ctx, 1) }()
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st.PrimitiveActors >= 2 && st.DelayedQueueMovers >= 1
	}, 5*time.Second, 10*time.Millisecond)

	f := spawn(t, "remote-forger", remoteEnv(srv, rt, map[string]string{
		"FORGE": "direct", "TARGET_IDS": internalIDs(t, rt), "LOCK_NAME": "app:L",
	}))
	replies := 0
	for _, line := range f.untilDone(t, 60*time.Second) {
		t.Logf("forger: %s", line)
		if rest, ok := strings.CutPrefix(line, "REPLY "); ok {
			replies++
			assert.Contains(t, rest, "ERROR_CODE_INVALID_ARGUMENT", "a request straight to an internal actor: %s", rest)
		}
	}
	assert.Positive(t, replies, "the internal actors answer (refusing)")
	require.NoError(t, held.Unlock(ctx))
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if k == "other:secret" || strings.HasPrefix(k, "actorlock_runtime:") { // the workers' runtimes'
			continue
		}
		assert.True(t, strings.HasPrefix(k, "app:") || strings.Contains(k, "{app:"), "key %q outside the runtime's prefix", k)
	}
	assert.Equal(t, []string{"another tenant's item"}, rdb.LRange(ctx, "other:secret", 0, -1).Val(), "another tenant's item stays")
}

// A peer forges RenewResponses to another owner's keeper, whose runtime
// no longer answers: the keeper must not take them for confirmations (its
// owner would believe it held the lock for the forged lease), and tells its
// owner the lock is lost when the lease (2 s) is over.
func TestRemoteKeeperIgnoresForgedRenewResponses(t *testing.T) {
	srv, _, rt := remoteSetup(t, 2*time.Second)
	k := spawn(t, "remote-keeper", remoteEnv(srv, rt, map[string]string{
		"KEEP_RUNTIME_ADDR": actorkit.RemoteAddress(rt), "KEEP_RUNTIME_ID": "nobody",
	}))
	pid := strings.Fields(k.expect(t, "KEEPER ", 10*time.Second))
	require.Len(t, pid, 2)
	k.expect(t, "KEPT", time.Second)
	kept := time.Now()
	spawn(t, "remote-forger", remoteEnv(srv, rt, map[string]string{
		"FORGE": "renew-response", "KEEPER_ADDR": pid[0], "KEEPER_ID": pid[1],
	}))
	k.expect(t, "LOST ", 5*time.Second)
	told := time.Since(kept)
	t.Logf("the keeper told its owner %v after the Keep (lease 2 s)", told)
	assert.Less(t, told, 2*time.Second+200*time.Millisecond)
}

// An owner acquires with a fixed lease (lease_ms 2 s, never renewed in
// Redis) under a 20 s watchdog lease, then is cut off from the runtime: its
// keeper must tell it the lock is lost before Redis lets anyone else in,
// not a watchdog lease later.
func TestRemoteOwnerWithAFixedLeaseIsToldBeforeTheLockIsFree(t *testing.T) {
	const lease, watchdog = 2 * time.Second, 20 * time.Second
	c := startCutOff(t, map[string]string{"LOCK_NAME": "remote-fixed", "LEASE_MS": strconv.Itoa(int(lease.Milliseconds()))},
		actorlock.WithWatchdog(watchdog))
	rdb, w := c.rdb, c.owner
	g := acquired(t, w)
	assert.Equal(t, lease, g.ttl)
	time.Sleep(lease / 2) // a renewal confirmed (every lease/3); cut after it
	c.cut()
	lostAt := make(chan time.Time, 1)
	go func() {
		line := w.expect(t, "LOST ", watchdog)
		assert.Contains(t, line, "keeper", "told by its own keeper")
		lostAt <- time.Now()
	}()
	freed := waitFree(t, rdb, "remote-fixed", lease+time.Second)
	var told time.Time
	select {
	case told = <-lostAt:
	case <-time.After(time.Second):
		t.Fatalf("the owner was not told within a second of the lock being free (%v after its grant)", freed.Sub(g.at))
	}
	t.Logf("the owner was told %v before the lock was free", freed.Sub(told))
	assert.False(t, told.After(freed.Add(100*time.Millisecond)), "told no later than the lock was free")
}
