package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// aclSetUser is the least-privilege Redis 7 ACL user of actorlock, exactly
// as README.md ("Security: TLS and ACL") shows it: every key (lock names
// are the application's own keys), Redisson's channels, and the commands
// actorlock runs, directly or inside its Lua scripts (Redis checks those
// against the calling user too). The tests below show that it is enough
// for every primitive (TestACLUserRunsEveryPrimitiveOverTLS) and that each
// grant is needed (TestACLEveryGrantIsNeeded).
const aclSetUser = "ACL SETUSER actorlock reset on >PASSWORD ~* resetchannels &redisson_*" +
	" +evalsha +eval +subscribe +unsubscribe +ping +exists +get +hget +pttl +llen +lpop +blpop +del" +
	" +time +set +incr +hset +hincrby +hexists +hdel +hlen +hkeys +pexpire +publish" +
	" +lindex +lrange +lrem +rpush +lpush +ltrim +zadd +zrem +zscore +zincrby +zrange +zrangebyscore" +
	" +decr +decrby +incrby +setnx"

// aclClusterGrants are what a Redis Cluster adds to aclSetUser: sharded
// pub/sub (SSUBSCRIBE, and SPUBLISH inside the scripts), the topology
// go-redis's ClusterClient reads (CLUSTER SLOTS) and the command table it
// routes by (COMMAND), whose COMMAND INFO also tells the runtime whether
// the cluster has sharded pub/sub.
const aclClusterGrants = "+ssubscribe +sunsubscribe +spublish +cluster|slots +command"

// aclGrants are the grants of aclSetUser: "~*", "&redisson_*" and each
// "+command" ("resetchannels" grants nothing).
func aclGrants() []string {
	var out []string
	for _, f := range strings.Fields(aclSetUser)[6:] {
		if f != "resetchannels" {
			out = append(out, f)
		}
	}
	return out
}

// createACLUser creates user with aclSetUser's rules, password instead of
// PASSWORD, without the grants in omit, and with extra rules after them.
func createACLUser(t testing.TB, admin *redis.Client, user, password string, omit []string, extra ...string) {
	t.Helper()
	args := []any{"acl", "setuser", user}
	for _, f := range strings.Fields(aclSetUser)[3:] {
		switch {
		case f == ">PASSWORD":
			args = append(args, ">"+password)
		case !slices.Contains(omit, f):
			args = append(args, f)
		}
	}
	for _, e := range extra {
		args = append(args, e)
	}
	require.NoError(t, admin.Do(context.Background(), args...).Err())
}

// secret is a random password nothing else in a test could contain.
func secret(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// adminClient connects to srv as the default (unrestricted) user, over TLS
// with the client certificate if srv is a TLS server.
func adminClient(t testing.TB, srv *redisserver.Server) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: srv.Addr}
	if srv.Certs != nil {
		cfg, err := srv.Certs.ClientConfig()
		require.NoError(t, err)
		opt.TLSConfig = cfg
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// urlClient is how an application connects: redis.ParseURL of
// redis[s]://user:password@addr, plus, for rediss, the CAs to trust and
// the client certificate to present (from cfg; nil: neither).
func urlClient(t testing.TB, scheme, addr, user, password string, cfg *tls.Config, tweak ...func(*redis.Options)) *redis.Client {
	t.Helper()
	u := url.URL{Scheme: scheme, User: url.UserPassword(user, password), Host: addr}
	opt, err := redis.ParseURL(u.String())
	require.NoError(t, err)
	if cfg != nil {
		opt.TLSConfig.RootCAs, opt.TLSConfig.Certificates = cfg.RootCAs, cfg.Certificates
	}
	for _, f := range tweak {
		f(opt)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// clientTLS trusts the CA of trust and presents the client certificate of
// present (nil: none).
func clientTLS(t testing.TB, trust, present *redisserver.Certs) *tls.Config {
	t.Helper()
	cfg, err := trust.ClientConfig()
	require.NoError(t, err)
	cfg.Certificates = nil
	if present != nil {
		p, err := present.ClientConfig()
		require.NoError(t, err)
		cfg.Certificates = p.Certificates
	}
	return cfg
}

// aclDenial is one ACL LOG entry.
type aclDenial struct {
	User, Reason, Object, Context string
}

// aclLog reads the server's ACL LOG: every command, key and channel it
// refused, including those inside scripts (context "lua").
func aclLog(t testing.TB, ctx context.Context, admin *redis.Client) []aclDenial {
	t.Helper()
	log, err := readACLLog(ctx, admin)
	require.NoError(t, err)
	return log
}

func readACLLog(ctx context.Context, admin *redis.Client) ([]aclDenial, error) {
	res, err := admin.Do(ctx, "acl", "log", 1000).Slice()
	if err != nil {
		return nil, err
	}
	var out []aclDenial
	for _, e := range res {
		f := map[string]string{}
		switch e := e.(type) {
		case map[any]any: // RESP3
			for k, v := range e {
				f[fmt.Sprint(k)] = fmt.Sprint(v)
			}
		case []any: // RESP2: a flat list of fields and values
			for i := 0; i+1 < len(e); i += 2 {
				f[fmt.Sprint(e[i])] = fmt.Sprint(e[i+1])
			}
		}
		out = append(out, aclDenial{User: f["username"], Reason: f["reason"], Object: f["object"], Context: f["context"]})
	}
	return out, nil
}

// deniedByACL reports whether s carries a Redis ACL refusal: NOPERM, or
// what Redis 7.0 answers when a command inside a script is refused.
func deniedByACL(s string) bool {
	return strings.Contains(s, "NOPERM") || strings.Contains(s, "The user executing the script can't")
}

// debugLogger logs everything, at every level, to a buffer the test reads.
func debugLogger() (*slog.Logger, *lockedBuffer) {
	buf := &lockedBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// ---- sufficient -------------------------------------------------------------

// A user created with exactly aclSetUser runs every primitive, over TLS with
// client certificates generated for the test: no command, key or channel
// is refused (the ACL LOG stays empty), and every command it grants was
// used.
func TestACLUserRunsEveryPrimitiveOverTLS(t *testing.T) {
	t.Parallel()
	srv, err := redisserver.StartTLS()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	admin := adminClient(t, srv)
	password := secret("pw-")
	createACLUser(t, admin, "actorlock", password, nil)
	ctx := ctxFor(t, time.Minute)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())

	dial := func() *redis.Client {
		return urlClient(t, "rediss", srv.Addr, "actorlock", password, clientTLS(t, srv.Certs, srv.Certs))
	}
	runPrimitives(t, dial, admin, "")

	assert.Empty(t, aclLog(t, ctx, admin), "nothing refused")
	stats, err := admin.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var used []string
	for _, g := range aclGrants() {
		if cmd, ok := strings.CutPrefix(g, "+"); ok {
			assert.Positive(t, commandCalls(stats, cmd), "granted +%s was never used", cmd)
			used = append(used, fmt.Sprintf("%s=%d", cmd, commandCalls(stats, cmd)))
		}
	}
	t.Logf("calls: %s", strings.Join(used, " "))
}

// Applications whose names share a prefix (here "app:") can narrow the
// keys and channels to it, as README.md shows; a name outside it is
// refused.
func TestACLUserNarrowedToAPrefix(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := adminClient(t, srv)
	password := secret("pw-")
	createACLUser(t, admin, "app", password, []string{"~*", "&redisson_*"}, strings.Fields(aclPrefixRules)...)
	ctx := ctxFor(t, time.Minute)
	dial := func() *redis.Client { return urlClient(t, "redis", srv.Addr, "app", password, nil) }
	runPrimitives(t, dial, admin, "app:")
	assert.Empty(t, aclLog(t, ctx, admin), "nothing refused")

	rt := newRuntime(t, dial())
	_, err := rt.Lock("other:1").TryAcquire(ctx)
	require.Error(t, err)
	assert.True(t, deniedByACL(err.Error()), "%v", err)
}

// aclPrefixRules replace "~*" and "&redisson_*" of aclSetUser when every
// name starts with "app:" and has no "{" (README.md).
const aclPrefixRules = "~app:* ~{app:* ~redisson_*:{app:* ~actorlock_request:{app:* resetchannels &redisson_*:{app:* &redisson_countdownlatch__channel__{app:*"

// runPrimitives exercises every primitive through two runtimes (on clients
// from dial), names prefixed with p: reentrant, fair and read-write locks
// with pub/sub wake-ups across runtimes, fencing tokens, watchdog renewal,
// force unlocks, delayed and blocking queues, semaphores and the count-down
// latch, one subtest each. admin only observes. opts configure every runtime.
func runPrimitives(t *testing.T, dial func() *redis.Client, admin *redis.Client, p string, opts ...actorlock.Option) {
	e := primitivesEnv{rtA: newRuntime(t, dial(), opts...), rtB: newRuntime(t, dial(), opts...), dial: dial, admin: admin, p: p, opts: opts}
	// The parts run at once, each a subtest, within this test's slot of
	// -parallel (they mostly wait).
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, part := range []struct {
		name string
		run  func(*testing.T, primitivesEnv)
	}{
		{"reentrant lock, fencing, wake-up", primReentrantLock},
		{"watchdog renewal", primWatchdog},
		{"fair lock", primFairLock},
		{"read-write lock", primReadWriteLock},
		{"delayed and blocking queues", primQueues},
		{"semaphores", primSemaphores},
		{"count-down latch", primLatch},
	} {
		wg.Go(func() { t.Run(part.name, func(t *testing.T) { part.run(t, e) }) })
	}
}

// primitivesEnv is what the parts of runPrimitives share.
type primitivesEnv struct {
	rtA, rtB *actorlock.Runtime // two runtimes on clients from dial
	dial     func() *redis.Client
	admin    *redis.Client // only observes
	p        string        // every name's prefix
	opts     []actorlock.Option
}

// primReentrantLock: runPrimitives' part "reentrant lock, fencing, wake-up".
func primReentrantLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "lock"
	a := rtA.Lock(name)
	// A fencing counter ahead of the server clock (as RFencedLock's
	// INCRs on top of ours leave it) is counted on by INCR.
	require.NoError(t, admin.Set(ctx, tokenKey(a.Name()), "9000000000000000", 0).Err())
	h1, err := a.Acquire(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 9000000000000001, h1.Token())
	h2, err := a.Acquire(h1.Context())
	require.NoError(t, err)
	assert.Greater(t, h2.Token(), h1.Token(), "fencing tokens increase")
	n, err := a.HoldCount(h1.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	locked, err := a.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	ttl, err := a.RemainTTL(ctx)
	require.NoError(t, err)
	assert.Positive(t, ttl)
	_, err = rtB.Lock(name).TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)

	// A waiter in the other runtime is woken by the unlock message,
	// long before the 30 s lease would have let it in.
	got := make(chan *actorlock.Held, 1)
	go func() {
		h, err := rtB.Lock(name).Acquire(ctx, actorlock.WaitTime(10*time.Second))
		assert.NoError(t, err)
		got <- h
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, h2.Unlock(ctx))
	unlocked := time.Now()
	require.NoError(t, h1.Unlock(ctx))
	h3 := <-got
	require.NotNil(t, h3)
	assert.Less(t, time.Since(unlocked), 2*time.Second, "woken by pub/sub")
	assert.Greater(t, h3.Token(), h2.Token())
	require.NoError(t, h3.Unlock(ctx))

	h4, err := a.Acquire(ctx)
	require.NoError(t, err)
	was, err := a.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
	select {
	case <-h4.Done():
		assert.ErrorIs(t, h4.Err(), actorlock.ErrLost)
	case <-time.After(5 * time.Second):
		t.Error("a force-unlocked hold is not lost")
	}
}

// primWatchdog: runPrimitives' part "watchdog renewal".
func primWatchdog(t *testing.T, e primitivesEnv) {
	dial, opts, p := e.dial, e.opts, e.p
	ctx := ctxFor(t, 20*time.Second)
	rt := newRuntime(t, dial(), append(opts, actorlock.WithWatchdog(600*time.Millisecond))...)
	h, err := rt.Lock(p + "watched").Acquire(ctx)
	require.NoError(t, err)
	rw := rt.ReadWriteLock(p + "watched-rw")
	r, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // 2.5 leases: renewed or lost
	for _, held := range []*actorlock.Held{h, r} {
		select {
		case <-held.Done():
			t.Fatalf("%s lost: %v", held.Name(), held.Err())
		default:
		}
		require.NoError(t, held.Unlock(ctx))
	}
}

// primFairLock: runPrimitives' part "fair lock".
func primFairLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "fair"
	h, err := rtA.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	queue, _ := fairKeys(rtA.FairLock(name).Name()) // the Redis name (WithKeyPrefix)
	queued := func(l *actorlock.Lock) bool { return admin.LPos(ctx, queue, l.Owner(), redis.LPosArgs{}).Err() == nil }
	wait := func(who string, rt *actorlock.Runtime, w time.Duration) *actorlock.Lock {
		l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":"+who))
		wg.Go(func() {
			h, err := l.Acquire(ctx, actorlock.WaitTime(w))
			if who == "quitter" {
				assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
				return
			}
			if assert.NoError(t, err, who) {
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				assert.NoError(t, h.Unlock(ctx))
			}
		})
		require.Eventually(t, func() bool { return queued(l) }, 5*time.Second, 2*time.Millisecond, "%s joins the queue", who)
		return l
	}
	wait("first", rtB, 10*time.Second)
	quitter := wait("quitter", rtB, 300*time.Millisecond)
	wait("second", rtA, 10*time.Second)
	wait("third", rtB, 10*time.Second)
	require.Eventually(t, func() bool { return !queued(quitter) }, 5*time.Second, 2*time.Millisecond, "the quitter leaves the queue")
	require.NoError(t, h.Unlock(ctx))
	wg.Wait()
	assert.Equal(t, []string{"first", "second", "third"}, order)
	_, err = rtA.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	was, err := rtB.FairLock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
}

// primReadWriteLock: runPrimitives' part "read-write lock".
func primReadWriteLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "rw"
	writer := rtA.ReadWriteLock(name)
	w, err := writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	readers := []*actorlock.ReadWriteLock{rtB.ReadWriteLock(name), rtA.ReadWriteLock(name)}
	held := make([]*actorlock.Held, len(readers))
	var waiting sync.WaitGroup
	for i, rw := range readers {
		waiting.Go(func() {
			h, err := rw.ReadLocker().Acquire(ctx, actorlock.WaitTime(10*time.Second))
			assert.NoError(t, err)
			held[i] = h
		})
	}
	time.Sleep(200 * time.Millisecond)
	for i := range held {
		assert.Nil(t, held[i], "readers wait for the writer")
	}
	require.NoError(t, w.Unlock(ctx))
	waiting.Wait()
	r1, r2 := held[0], held[1]
	require.NotNil(t, r1)
	require.NotNil(t, r2)
	_, err = readers[0].WriteLocker().TryAcquire(r1.Context())
	assert.ErrorIs(t, err, actorlock.ErrUpgrade)
	require.NoError(t, r1.Unlock(ctx)) // the other reader still holds
	require.NoError(t, r2.Unlock(ctx))

	// Downgrade: the writer reads too, then releases the write.
	w, err = writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	r, err := writer.ReadLocker().Acquire(w.Context())
	require.NoError(t, err)
	require.NoError(t, w.Unlock(ctx))
	locked, err := writer.ReadLocker().IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked, "still read-locked after the downgrade")
	require.NoError(t, r.Unlock(ctx))

	_, err = writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	was, err := rtB.ReadWriteLock(name).WriteLocker().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
}

// primQueues: runPrimitives' part "delayed and blocking queues".
func primQueues(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "jobs"
	dq := rtA.DelayedQueue(name)
	t.Cleanup(func() { _ = dq.Close() })
	bq := rtB.BlockingQueue(name)
	taken := make(chan string, 1)
	go func() {
		v, err := bq.Take(ctx)
		assert.NoError(t, err)
		taken <- string(v)
	}()
	require.NoError(t, dq.Offer(ctx, []byte("soon"), 200*time.Millisecond))
	require.NoError(t, dq.Offer(ctx, []byte("later"), time.Hour))
	n, err := dq.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	select {
	case v := <-taken:
		assert.Equal(t, "soon", v)
	case <-time.After(5 * time.Second):
		t.Fatal("the delayed item never arrived")
	}
	has, err := dq.Contains(ctx, []byte("later"))
	require.NoError(t, err)
	assert.True(t, has)
	removed, err := dq.Remove(ctx, []byte("later"))
	require.NoError(t, err)
	assert.True(t, removed)
	require.NoError(t, dq.Offer(ctx, []byte("polled"), time.Hour))
	v, ok, err := dq.Poll(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "polled", string(v))
	require.NoError(t, dq.Offer(ctx, []byte("cleared"), time.Hour))
	require.NoError(t, dq.Clear(ctx))

	require.NoError(t, bq.Offer(ctx, []byte("x")))
	n, err = bq.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	v, ok, err = bq.Poll(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "x", string(v))

	// A Take cancelled while its blocking pop runs: the item that
	// pop then gets is given back to the head of the list.
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := bq.Take(tctx); done <- err }()
	waitBlockedClient(t, ctx, admin)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, rtA.BlockingQueue(name).Offer(ctx, []byte("given back")))
	require.Eventually(t, func() bool {
		v, ok, err := rtA.BlockingQueue(name).Poll(ctx)
		return err == nil && ok && string(v) == "given back"
	}, 5*time.Second, 50*time.Millisecond)
}

// primSemaphores: runPrimitives' part "semaphores".
func primSemaphores(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "sem"
	s := rtA.Semaphore(name)
	set, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, set)
	got := make(chan error, 1)
	go func() { got <- rtB.Semaphore(name).Acquire(ctx, 2) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.AddPermits(ctx, 1))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	require.NoError(t, s.Release(ctx, 2))
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, ok)
	n, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = s.Available(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	ps := rtA.PermitExpirableSemaphore(name + "-expirable")
	_, err = ps.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	id1, err := ps.Acquire(ctx, 200*time.Millisecond)
	require.NoError(t, err)
	id2, err := rtB.PermitExpirableSemaphore(name+"-expirable").Acquire(ctx, 0) // once id1 expires
	require.NoError(t, err)
	assert.ErrorIs(t, ps.Release(ctx, id1), actorlock.ErrPermitExpired)
	require.NoError(t, ps.Release(ctx, id2))
	n, err = ps.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

// primLatch: runPrimitives' part "count-down latch".
func primLatch(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "latch"
	l := rtA.CountDownLatch(name)
	ok, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	done := make(chan error, 1)
	go func() { done <- rtB.CountDownLatch(name).Await(ctx) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, l.CountDown(ctx))
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	require.NoError(t, l.CountDown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Await did not return")
	}
	ok, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	deleted, err := l.Delete(ctx)
	require.NoError(t, err)
	assert.True(t, deleted)
}

// ---- tight ------------------------------------------------------------------

// aclProbe exercises one grant of aclSetUser.
type aclProbe func(ctx context.Context, e probeEnv) error

type probeEnv struct {
	t     *testing.T
	rt    *actorlock.Runtime // as a user with every grant but the one probed
	full  *actorlock.Runtime // as a user with every grant: holds what rt waits for
	admin *redis.Client      // the default user, to observe
	name  string             // the probe's own name
}

// aclProbes has a probe for every grant: without the grant, the probe's
// path fails.
var aclProbes = map[string]aclProbe{
	"~*": tryLock, "+evalsha": tryLock, "+eval": tryLock,
	"+time": tryLock, "+incr": tryLockCounterAhead, "+set": tryLock, "+hset": tryLock, "+pexpire": tryLock,
	"&redisson_*": lockUnlock, "+publish": lockUnlock, "+get": lockUnlock,
	"+del": lockUnlock, "+hget": lockUnlock,
	"+subscribe": func(ctx context.Context, e probeEnv) error {
		// A waiter subscribes to the unlock channel.
		h, err := e.full.Lock(e.name).Acquire(ctx)
		if err != nil {
			return err
		}
		_, err = e.rt.Lock(e.name).Acquire(ctx, actorlock.WaitTime(300*time.Millisecond))
		if errors.Is(err, actorlock.ErrNotAcquired) {
			err = nil
		}
		return errors.Join(err, h.Unlock(ctx))
	},
	"+unsubscribe": func(ctx context.Context, e probeEnv) error {
		// A waiter that got the lock leaves the unlock channel.
		h, err := e.full.Lock(e.name).Acquire(ctx)
		if err != nil {
			return err
		}
		got := make(chan error, 1)
		go func() {
			h, err := e.rt.Lock(e.name).Acquire(ctx, actorlock.WaitTime(10*time.Second))
			if err == nil {
				err = h.Unlock(ctx)
			}
			got <- err
		}()
		waitSubscribers(e.t, ctx, e.admin, scripts.LockChannel(e.name), 1)
		return errors.Join(h.Unlock(ctx), <-got)
	},
	"+ping": func(context.Context, probeEnv) error {
		return nil // the pub/sub connection pings once silent for a second
	},
	"+exists": func(ctx context.Context, e probeEnv) error {
		_, err := e.rt.Lock(e.name).IsLocked(ctx)
		return err
	},
	"+pttl": func(ctx context.Context, e probeEnv) error {
		_, err := e.rt.Lock(e.name).RemainTTL(ctx)
		return err
	},
	"+hincrby": func(ctx context.Context, e probeEnv) error {
		l := e.rt.Lock(e.name)
		h, err := l.Acquire(ctx)
		if err != nil {
			return err
		}
		_, err = l.Acquire(h.Context()) // re-entry
		return err
	},
	"+hexists": tryFair, "+lindex": tryFair,
	"+zincrby": func(ctx context.Context, e probeEnv) error {
		// The head of the queue takes the lock and moves the waiter behind
		// it up.
		h, err := e.full.FairLock(e.name).Acquire(ctx)
		if err != nil {
			return err
		}
		queue, _ := fairKeys(e.name)
		head := make(chan error, 1)
		for i, l := range []*actorlock.Lock{
			e.rt.FairLock(e.name, actorlock.WithOwner(e.rt.ID()+":head")),
			e.full.FairLock(e.name, actorlock.WithOwner(e.full.ID()+":next")),
		} {
			go func() {
				h, err := l.Acquire(ctx, actorlock.WaitTime(2*time.Second))
				if err == nil {
					err = h.Unlock(ctx)
				}
				if i == 0 {
					head <- err
				}
			}()
			require.Eventually(e.t, func() bool { return e.admin.LPos(ctx, queue, l.Owner(), redis.LPosArgs{}).Err() == nil },
				5*time.Second, 2*time.Millisecond, "waiter %d joins the queue", i)
		}
		return errors.Join(h.Unlock(ctx), <-head)
	},
	"+hdel": writeLockUnlock, "+hlen": writeLockUnlock,
	"+hkeys": func(ctx context.Context, e probeEnv) error {
		r1, err := e.rt.ReadWriteLock(e.name).ReadLocker().Acquire(ctx)
		if err != nil {
			return err
		}
		if _, err := e.rt.ReadWriteLock(e.name).ReadLocker().Acquire(ctx); err != nil {
			return err
		}
		return r1.Unlock(ctx) // the other reader still holds: live read holds are looked up
	},
	"+zscore": offerDelayed, "+zadd": offerDelayed, "+zrange": offerDelayed, "+rpush": offerDelayed,
	"+lrange": func(ctx context.Context, e probeEnv) error {
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		_, err := q.Contains(ctx, []byte("x"))
		return err
	},
	"+zrem": func(ctx context.Context, e probeEnv) error {
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		if err := q.Offer(ctx, []byte("x"), time.Hour); err != nil {
			return err
		}
		_, _, err := q.Poll(ctx)
		return err
	},
	"+lrem": func(ctx context.Context, e probeEnv) error {
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		if err := q.Offer(ctx, []byte("x"), time.Hour); err != nil {
			return err
		}
		_, err := q.Remove(ctx, []byte("x"))
		return err
	},
	"+ltrim": func(ctx context.Context, e probeEnv) error {
		// The mover fails to move the due item (it keeps trying while
		// items are pending, handle or not).
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		return q.Offer(ctx, []byte("x"), 0)
	},
	"+llen": func(ctx context.Context, e probeEnv) error {
		_, err := e.rt.BlockingQueue(e.name).Len(ctx)
		return err
	},
	"+lpop": func(ctx context.Context, e probeEnv) error {
		_, _, err := e.rt.BlockingQueue(e.name).Poll(ctx)
		return err
	},
	"+blpop": func(ctx context.Context, e probeEnv) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := e.rt.BlockingQueue(e.name).Take(ctx)
		return err
	},
	"+lpush": func(ctx context.Context, e probeEnv) error {
		// A Take cancelled while its blocking pop runs gives back the item
		// that pop then gets.
		tctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _, _ = e.rt.BlockingQueue(e.name).Take(tctx); close(done) }()
		waitBlockedClient(e.t, ctx, e.admin)
		cancel()
		<-done
		return e.full.BlockingQueue(e.name).Offer(ctx, []byte("x"))
	},
	"+setnx": func(ctx context.Context, e probeEnv) error {
		_, err := e.rt.Semaphore(e.name).TrySetPermits(ctx, 1)
		return err
	},
	"+decrby": func(ctx context.Context, e probeEnv) error {
		if _, err := e.rt.Semaphore(e.name).TrySetPermits(ctx, 1); err != nil {
			return err
		}
		_, err := e.rt.Semaphore(e.name).TryAcquire(ctx, 1)
		return err
	},
	"+incrby": func(ctx context.Context, e probeEnv) error {
		return e.rt.Semaphore(e.name).Release(ctx, 1)
	},
	"+zrangebyscore": func(ctx context.Context, e probeEnv) error {
		_, _, err := e.rt.PermitExpirableSemaphore(e.name).TryAcquire(ctx, time.Second)
		return err
	},
	"+decr": func(ctx context.Context, e probeEnv) error {
		if _, err := e.rt.CountDownLatch(e.name).TrySetCount(ctx, 2); err != nil {
			return err
		}
		return e.rt.CountDownLatch(e.name).CountDown(ctx)
	},
}

func tryLock(ctx context.Context, e probeEnv) error {
	_, err := e.rt.Lock(e.name).TryAcquire(ctx)
	return err
}

// tryLockCounterAhead needs INCR: a fencing counter ahead of the server's
// clock in microseconds is counted on, not reset to the clock.
func tryLockCounterAhead(ctx context.Context, e probeEnv) error {
	if err := e.admin.Set(ctx, tokenKey(e.name), "9000000000000000", 0).Err(); err != nil {
		return err
	}
	return tryLock(ctx, e)
}

func lockUnlock(ctx context.Context, e probeEnv) error {
	h, err := e.rt.Lock(e.name).Acquire(ctx)
	if err != nil {
		return err
	}
	if _, err := e.rt.Lock(e.name).HoldCount(ctx); err != nil {
		return err
	}
	return h.Unlock(ctx)
}

func tryFair(ctx context.Context, e probeEnv) error {
	_, err := e.rt.FairLock(e.name).TryAcquire(ctx)
	return err
}

func writeLockUnlock(ctx context.Context, e probeEnv) error {
	h, err := e.rt.ReadWriteLock(e.name).WriteLocker().Acquire(ctx)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}

func offerDelayed(ctx context.Context, e probeEnv) error {
	q := e.rt.DelayedQueue(e.name)
	defer q.Close()
	return q.Offer(ctx, []byte("x"), time.Hour)
}

// waitBlockedClient waits until a client of the server is blocked (in
// BLPOP): only one of the test's clients ever blocks at a time.
func waitBlockedClient(t testing.TB, ctx context.Context, admin *redis.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := admin.Info(ctx, "clients").Result()
		return err == nil && strings.Contains(info, "blocked_clients:1")
	}, 5*time.Second, 2*time.Millisecond, "a client blocks")
}

// Each grant of aclSetUser is needed: for each, a user with every other
// grant runs a path that uses it, and Redis refuses it (ACL LOG names what
// was refused) and the caller sees the refusal (returned error or log).
func TestACLEveryGrantIsNeeded(t *testing.T) {
	t.Parallel()
	grants := aclGrants()
	for _, g := range grants {
		require.Contains(t, aclProbes, g, "no probe for %s", g)
	}
	require.Len(t, aclProbes, len(grants), "a probe for a grant that is not in aclSetUser")

	srv := startRedis(t, "--acllog-max-len", "1000")
	admin := adminClient(t, srv)
	password := secret("pw-")
	createACLUser(t, admin, "full", password, nil)
	full := newRuntime(t, urlClient(t, "redis", srv.Addr, "full", password, nil))
	// The probes run at once, each a subtest, within this test's slot of
	// -parallel (they mostly wait).
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, g := range grants {
		wg.Go(func() { t.Run(g, func(t *testing.T) { probeGrant(t, g, srv, admin, full, password) }) })
	}
}

// probeGrant runs g's probe as a user with every grant but g, on srv (on a
// server of its own for +eval).
func probeGrant(t *testing.T, g string, srv *redisserver.Server, admin *redis.Client, full *actorlock.Runtime, password string) {
	if g == "+eval" {
		// EVAL is needed once per script and server (then EVALSHA
		// finds it cached): on a server of its own, it is needed now.
		srv = startRedis(t)
		admin = adminClient(t, srv)
		createACLUser(t, admin, "full", password, nil)
		full = newRuntime(t, urlClient(t, "redis", srv.Addr, "full", password, nil))
	}
	user := "without-" + strings.NewReplacer("+", "", "~", "keys", "&", "channels-", "*", "").Replace(g)
	createACLUser(t, admin, user, password, []string{g})
	logger, logs := debugLogger()
	rt := newRuntime(t, urlClient(t, "redis", srv.Addr, user, password, nil), actorlock.WithLogger(logger))
	ctx := ctxFor(t, 20*time.Second)
	err := aclProbes[g](ctx, probeEnv{t: t, rt: rt, full: full, admin: admin, name: "probe:" + g})

	// Redis refused exactly what the grant allows.
	want := aclDenial{User: user, Reason: "command", Object: strings.TrimPrefix(g, "+")}
	switch g[0] {
	case '~':
		want.Reason, want.Object = "key", ""
	case '&':
		want.Reason, want.Object = "channel", ""
	}
	var denials []aclDenial
	found := assert.Eventually(t, func() bool {
		denials = nil
		log, _ := readACLLog(ctx, admin)
		for _, d := range log {
			if d.User == user {
				denials = append(denials, d)
				if d.Reason == want.Reason && (want.Object == "" || d.Object == want.Object) {
					return true
				}
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "no refusal of %s", g)
	if !found {
		t.Logf("refused: %+v", denials)
	}
	// And the caller is told: by the returned error, or in the log
	// when nobody was waiting for the call (pub/sub, movers,
	// give-backs).
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if !deniedByACL(msg) {
		require.Eventually(t, func() bool { return deniedByACL(logs.String()) }, 3*time.Second, 20*time.Millisecond,
			"without %s: the error %q and the log %q show no ACL refusal", g, msg, logs.String())
		msg = "log: " + logLineWith(logs.String(), "NOPERM", "can't")
	}
	t.Logf("without %s: %s", g, msg)
}

// logLineWith is the first line of logs containing any of subs.
func logLineWith(logs string, subs ...string) string {
	for _, line := range strings.Split(logs, "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				return line
			}
		}
	}
	return ""
}

// The refusals users meet first, spelled out: without +evalsha nothing
// runs, and without +publish (inside the unlock script) Unlock fails.
func TestACLMissingCommandGivesAClearError(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := adminClient(t, srv)
	password := secret("pw-")
	ctx := ctxFor(t, 20*time.Second)

	createACLUser(t, admin, "no-evalsha", password, []string{"+evalsha"})
	rt := newRuntime(t, urlClient(t, "redis", srv.Addr, "no-evalsha", password, nil))
	_, err := rt.Lock("orders:1").TryAcquire(ctx)
	require.Error(t, err)
	assert.Equal(t, `actorlock: acquire "orders:1": NOPERM this user has no permissions to run the 'evalsha' command`, err.Error())

	createACLUser(t, admin, "no-publish", password, []string{"+publish"})
	rt = newRuntime(t, urlClient(t, "redis", srv.Addr, "no-publish", password, nil))
	h, err := rt.Lock("orders:2").Acquire(ctx)
	require.NoError(t, err)
	err = h.Unlock(ctx)
	require.Error(t, err)
	// Redis 7.0 does not name a command refused inside a script (newer
	// versions answer NOPERM and name it); its ACL LOG does.
	assert.Regexp(t, regexp.MustCompile(`^actorlock: unlock "orders:2": (ERR The user executing the script can't run this command or subcommand|NOPERM .*'publish')`), err.Error())
	assert.Contains(t, aclLog(t, ctx, admin), aclDenial{User: "no-publish", Reason: "command", Object: "publish", Context: "lua"})
}

// WithReplicaSync needs +wait on top of aclSetUser; without it every
// acquisition counts as unconfirmed and fails with ErrReplicaSync.
func TestACLReplicaSyncNeedsWait(t *testing.T) {
	t.Parallel()
	// No 5 s wait for more replicas before the first sync.
	master := startRedis(t, "--repl-diskless-sync-delay", "0")
	replica, err := redisserver.StartReplica(master)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Close() })
	rc := client(t, replica.Addr)
	require.Eventually(t, func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond)
	admin := adminClient(t, master)
	ctx := ctxFor(t, 20*time.Second)
	password := secret("pw-")
	createACLUser(t, admin, "synced", password, nil, "+wait")
	createACLUser(t, admin, "unsynced", password, nil)
	sync := actorlock.WithReplicaSync(1, 500*time.Millisecond)

	rt := newRuntime(t, urlClient(t, "redis", master.Addr, "synced", password, nil), sync)
	h, err := rt.Lock("synced").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Unlock(ctx))
	assert.Empty(t, aclLog(t, ctx, admin))

	rt = newRuntime(t, urlClient(t, "redis", master.Addr, "unsynced", password, nil), sync, actorlock.WithReplicaSyncAttempts(1))
	_, err = rt.Lock("unsynced").Acquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrReplicaSync)
	assert.Contains(t, aclLog(t, ctx, admin), aclDenial{User: "unsynced", Reason: "command", Object: "wait", Context: "toplevel"})
}

// Every command a script runs is granted: a new command in a script must be
// added to aclSetUser (and README.md), which this test asks for.
func TestACLCoversEveryScriptCommand(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../scripts/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// PUBLISH is the variable scripts.newScript defines: 'publish', or
	// 'spublish' in the cluster variant (aclClusterGrants).
	call := regexp.MustCompile(`redis\.p?call\(\s*(?:['"]([A-Za-z_|]+)['"]|(PUBLISH)\b)`)
	calls := regexp.MustCompile(`redis\.p?call\(`)
	grants := aclGrants()
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Len(t, call.FindAllSubmatch(src, -1), len(calls.FindAllIndex(src, -1)),
			"%s: a redis.call whose command is not a literal", f)
		for _, m := range call.FindAllSubmatch(src, -1) {
			cmd := string(m[1]) + string(m[2])
			assert.Contains(t, grants, "+"+strings.ToLower(cmd), "%s runs %s", filepath.Base(f), cmd)
		}
	}
}

// README.md shows exactly the line these tests check.
func TestREADMEShowsTheACLLine(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), aclSetUser)
	assert.Contains(t, string(readme), aclPrefixRules)
	assert.Contains(t, string(readme), "append\n  `"+aclClusterGrants+"`")
}

// ---- secrets ----------------------------------------------------------------

// No password (nor the URL's userinfo) appears in a returned error or a log
// line of the runtime, whatever fails: a wrong password, certificates the
// server or the client refuses, or the server going away under held locks,
// waiters, queues and message-based requests.
func TestSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	t.Parallel()
	awaitDialRetries(t)
	srv, err := redisserver.StartTLS()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	admin := adminClient(t, srv)
	password, wrong := secret("pw-"), secret("wrong-pw-")
	createACLUser(t, admin, "actorlock", password, nil)
	ctx := ctxFor(t, time.Minute)
	logger, logs := debugLogger()

	var mu sync.Mutex
	var errs []error
	note := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	// By default go-redis re-dials a failed dial 5 times, 100 ms apart,
	// and retries a failed read-only command 3 times, per call.
	oneRetry := func(o *redis.Options) { o.DialerRetries, o.MaxRetries = 1, -1 }
	runtimeOn := func(rdb *redis.Client) *actorlock.Runtime {
		return newRuntime(t, rdb, actorlock.WithLogger(logger), actorlock.WithWatchdog(600*time.Millisecond),
			actorlock.WithCallTimeout(2*time.Second))
	}
	// A few calls of every kind, each expected to fail.
	failAll := func(rt *actorlock.Runtime, what string) {
		_, err := rt.Lock(what).TryAcquire(ctx)
		assert.Error(t, err, what)
		note(err)
		_, err = rt.Lock(what).Acquire(ctx, actorlock.WaitTime(300*time.Millisecond))
		note(err)
		_, err = rt.FairLock(what + "-fair").TryAcquire(ctx)
		note(err)
		_, err = rt.Lock(what).IsLocked(ctx)
		note(err)
		note(rt.Semaphore(what).Release(ctx, 1))
		_, err = rt.CountDownLatch(what).Count(ctx)
		note(err)
		q := rt.DelayedQueue(what)
		note(q.Offer(ctx, []byte("x"), time.Second))
		note(q.Close())
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = rt.BlockingQueue(what).Take(tctx)
		cancel()
		note(err)
	}

	// A wrong password; a client certificate of another CA, which the
	// server refuses; a server certificate the client does not trust; no
	// client certificate.
	good := clientTLS(t, srv.Certs, srv.Certs)
	rogue, err := redisserver.NewCerts(t.TempDir())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for what, c := range map[string]struct {
		password string
		cfg      *tls.Config
	}{
		"wrong-password":    {wrong, good},
		"rogue-client-cert": {password, clientTLS(t, srv.Certs, rogue)},
		"untrusted-server":  {password, clientTLS(t, rogue, srv.Certs)},
		"no-client-cert":    {password, clientTLS(t, srv.Certs, nil)},
	} {
		rt := runtimeOn(urlClient(t, "rediss", srv.Addr, "actorlock", c.password, c.cfg, oneRetry))
		wg.Go(func() { failAll(rt, what) })
	}
	wg.Wait()

	// The server goes away while locks are held and renewed, a waiter and a
	// Take wait and an actor has a request pending.
	rt := runtimeOn(urlClient(t, "rediss", srv.Addr, "actorlock", password, good, oneRetry))
	held, err := rt.Lock("held").Acquire(ctx)
	require.NoError(t, err)
	fair, err := rt.FairLock("held-fair").Acquire(ctx)
	require.NoError(t, err)
	waiting := make(chan error, 2)
	go func() {
		_, err := rt.Lock("held").Acquire(ctx, actorlock.WaitTime(3*time.Second))
		waiting <- err
	}()
	go func() {
		_, err := rt.BlockingQueue("jobs").Take(ctx)
		waiting <- err
	}()
	sys := rt.ActorSystem()
	owner := spawnProbe(t, sys)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, srv.Stop())
	owner.send(sys, rt.PID(), &messages.AcquireRequest{RequestId: "r1", Name: "held", Kind: messages.Kind_KIND_LOCK, WaitMs: 500})
	resp := receive[*messages.AcquireResponse](t, owner, 10*time.Second)
	require.NotNil(t, resp.Error)
	note(errors.New(resp.Error.Message))
	failAll(rt, "stopped")
	note(<-waiting)
	select {
	case <-held.Done(): // renewal failed for a whole lease
	case <-time.After(5 * time.Second):
		t.Error("a hold outlived its lease without renewal")
	}
	note(held.Err())
	note(held.Unlock(ctx))
	note(fair.Unlock(ctx))
	rt.ActorSystem().Root.Stop(owner.pid)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	note(rt.Close(cctx))
	cancel()
	note(<-waiting)

	log := logs.String()
	for _, s := range []string{password, wrong, url.UserPassword("actorlock", password).String()} {
		assert.NotContains(t, log, s, "a secret in the log")
		for _, err := range errs {
			assert.NotContains(t, err.Error(), s, "a secret in an error")
			assert.NotContains(t, fmt.Sprintf("%+v", err), s, "a secret in an error")
		}
	}
	// The paths above did fail, and were logged.
	all := ""
	for _, err := range errs {
		all += err.Error() + "\n"
	}
	assert.Contains(t, all, "WRONGPASS")
	assert.Contains(t, all, "certificate")
	assert.Contains(t, log, "lock renewal failed")
	t.Logf("%d errors and %d log lines checked; e.g.\n%s", len(errs), strings.Count(log, "\n"), firstLines(all, 12))
}

// awaitDialRetries makes the test wait, after its clients are closed,
// until go-redis's dial retries have ended (up to 3 s): a client whose dial
// failed keeps a goroutine that re-dials every second until it sees its
// client closed, which the leak check would report.
func awaitDialRetries(t *testing.T) {
	t.Cleanup(func() {
		buf := make([]byte, 8<<20)
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*ConnPool).tryDial")) {
				return
			}
		}
	})
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// ---- TLS handshake failures ---------------------------------------------------

// A call that failed in the TLS handshake on the client's side never
// reached Redis, like one whose dial failed: it is neither re-attempted nor
// undone. (Before, a failed acquisition was followed by undo attempts every
// 100 ms, and a Release was re-attempted three times, as if their outcome
// were unknown.)
func TestFailedTLSHandshakeIsFinal(t *testing.T) {
	t.Parallel()
	awaitDialRetries(t)
	srv, err := redisserver.StartTLS()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rogue, err := redisserver.NewCerts(t.TempDir())
	require.NoError(t, err)
	for what, c := range map[string]struct {
		addr string
		cfg  *tls.Config
	}{
		"untrusted server certificate": {srv.Addr, clientTLS(t, rogue, srv.Certs)},
		"server without TLS":           {plainRefusal(t), clientTLS(t, srv.Certs, srv.Certs)},
	} {
		t.Run(what, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: c.addr, TLSConfig: c.cfg, DialerRetries: 1})
			t.Cleanup(func() { _ = rdb.Close() })
			calls := &callCounter{}
			rdb.AddHook(calls)
			rt := newRuntime(t, rdb)
			ctx := ctxFor(t, 10*time.Second)

			_, err := rt.Lock("tls").TryAcquire(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "tls: ")
			err = rt.Semaphore("tls").Release(ctx, 1)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "tls: ")
			time.Sleep(500 * time.Millisecond)
			assert.EqualValues(t, 2, calls.n.Load(), "one call each, nothing re-attempted or undone")
		})
	}
}

// plainRefusal listens on a loopback port and answers every connection in
// plain text, as Redis does when protected mode refuses a client, and
// closes it.
func plainRefusal(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("-DENIED Redis is running in protected mode\r\n"))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String()
}

// callCounter counts the commands and pipelines a client was given.
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// On a 3-master Redis Cluster, aclSetUser plus aclClusterGrants, set on
// every master, runs every primitive with sharded pub/sub and nothing is
// refused anywhere.
func TestACLUserOnACluster(t *testing.T) {
	t.Parallel()
	d := startDeployment(t, "cluster")
	password := secret("pw-")
	ctx := ctxFor(t, time.Minute)
	for _, m := range d.servers {
		admin := client(t, m.Addr)
		createACLUser(t, admin, "actorlock", password, nil, strings.Fields(aclClusterGrants)...)
		require.NoError(t, admin.ConfigResetStat(ctx).Err())
	}
	runtime := func() *actorlock.Runtime {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.cluster.Addrs(), Username: "actorlock", Password: password})
		t.Cleanup(func() { _ = rdb.Close() })
		return newRuntime(t, rdb)
	}
	exercisePrimitives(t, ctx, runtime(), runtime(), "acl")

	var sharded int64
	for _, m := range d.servers {
		admin := client(t, m.Addr)
		assert.Empty(t, aclLog(t, ctx, admin), "nothing refused on %s", m.Addr)
		stats, err := admin.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		sharded += commandCalls(stats, "ssubscribe")
	}
	assert.Positive(t, sharded, "waiters subscribed with SSUBSCRIBE")
}
