package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/scripts"
)

// ---- tight ------------------------------------------------------------------

// aclProbe exercises one grant of aclSetUser.
type aclProbe func(ctx context.Context, e probeEnv) error

type probeEnv struct {
	t     *testing.T
	rt    *actorlock.Runtime // as a user with every grant but the one probed
	full  *actorlock.Runtime // as a user with every grant: holds what rt waits for
	admin *redis.Client      // the default user, to observe
	name  string             // the probe's own name
	user  string             // rt's user
}

// refused reports, once it happens, that Redis refused e.user for reason
// (ACL LOG); false if ctx ends first.
func (e probeEnv) refused(ctx context.Context, reason string) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		log, _ := readACLLog(ctx, e.admin)
		for _, d := range log {
			if d.User == e.user && d.Reason == reason {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// aclProbes has a probe for every grant: without the grant, the probe's
// path fails.
var aclProbes = map[string]aclProbe{
	"~*": tryLock, "+evalsha": tryLock, "+eval": tryLock,
	"+time": tryLock, "+incr": tryLockCounterAhead, "+set": tryLock, "+hset": tryLock, "+pexpire": tryLock,
	// +get: a reentrant unlock reads its latch only when retried (and a
	// token no longer takes a GET); a read-write unlock always reads it.
	"&redisson_*": lockUnlock, "+publish": lockUnlock, "+get": latchCount,
	"+del": lockUnlock, "+hget": lockUnlock,
	"+subscribe": func(ctx context.Context, e probeEnv) error {
		// A waiter subscribes to the unlock channel. It gives up once Redis
		// has refused that: a fixed short wait could end, on a loaded
		// machine, before the subscription was tried.
		h, err := e.full.Lock(e.name).Acquire(ctx)
		if err != nil {
			return err
		}
		wctx, giveUp := context.WithCancel(ctx)
		defer giveUp()
		go func() {
			if e.refused(wctx, "channel") {
				giveUp()
			}
		}()
		_, err = e.rt.Lock(e.name).Acquire(wctx, actorlock.WaitTime(10*time.Second))
		if errors.Is(err, actorlock.ErrNotAcquired) || errors.Is(err, context.Canceled) {
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
	"+hmget": func(ctx context.Context, e probeEnv) error {
		// An acquisition of a held lock reads the owner's count and the
		// mode field (one kind per name) in one HMGET.
		l := e.rt.Lock(e.name)
		h, err := l.Acquire(ctx)
		if err != nil {
			return err
		}
		_, err = l.Acquire(h.Context())
		return err
	},
	"+hexists": tryFair, "+lindex": tryFair,
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
	"+zadd": offerDelayed, "+zrange": offerDelayed, "+rpush": offerDelayed,
	"+zscore": func(ctx context.Context, e probeEnv) error {
		// A permit-expirable acquisition looks its permit ids up.
		_, _, err := e.rt.PermitExpirableSemaphore(e.name).TryAcquire(ctx, time.Second)
		return err
	},
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
		// The delayed queue's poll script pops the oldest item.
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		if err := q.Offer(ctx, []byte("x"), time.Hour); err != nil {
			return err
		}
		_, _, err := q.Poll(ctx)
		return err
	},
	"+lmove": func(ctx context.Context, e probeEnv) error {
		_, _, err := e.rt.BlockingQueue(e.name).Poll(ctx)
		return err
	},
	"+blmove": func(ctx context.Context, e probeEnv) error {
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
	"+type": func(ctx context.Context, e probeEnv) error {
		// The scripts of the semaphores, the latch and the queues check
		// the name's kind first (one kind per name).
		_, err := e.rt.CountDownLatch(e.name).TrySetCount(ctx, 1)
		return err
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
	"+lpos": func(ctx context.Context, e probeEnv) error {
		// Two items due at the same ms behind one not due yet: the mover
		// looks up their places in the list to move them in the order
		// offered.
		timeouts, list := scripts.DelayTimeoutKey(e.name), scripts.DelayQueueKey(e.name)
		now, err := e.admin.Time(ctx).Result()
		if err != nil {
			return err
		}
		for i, due := range []int64{now.UnixMilli() + 3_600_000, 0, 0} {
			m := scripts.DelayMember([8]byte{byte(9 - i)}, []byte{byte('a' + i)})
			if err := e.admin.ZAdd(ctx, timeouts, redis.Z{Score: float64(due), Member: m}).Err(); err != nil {
				return err
			}
			if err := e.admin.RPush(ctx, list, m).Err(); err != nil {
				return err
			}
		}
		q := e.rt.DelayedQueue(e.name)
		defer q.Close()
		return nil
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

// latchCount reads a count-down latch's count: a GET (no unlock reads its
// latch on a first attempt any more).
func latchCount(ctx context.Context, e probeEnv) error {
	_, err := e.rt.CountDownLatch(e.name).Count(ctx)
	return err
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
	// Without the runtime's record, whose SET at start would be refused
	// too (without +set or ~*) and so answer for the probe's own path.
	rt := newRuntime(t, urlClient(t, "redis", srv.Addr, user, password, nil), actorlock.WithLogger(logger),
		actorlock.WithRuntimeRecord(false))
	ctx := ctxFor(t, 20*time.Second)
	err := aclProbes[g](ctx, probeEnv{t: t, rt: rt, full: full, admin: admin, name: "probe:" + g, user: user})

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
// added to aclSetUser (and docs/security.md), which this test asks for.
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

// docs/security.md shows exactly the line these tests check.
func TestREADMEShowsTheACLLine(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/security.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), aclSetUser)
	assert.Contains(t, string(readme), aclPrefixRules)
	assert.Contains(t, string(readme), "append\n  `"+aclClusterGrants+"`")
}
