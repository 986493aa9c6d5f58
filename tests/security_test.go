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
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/messages"
)

// aclSetUser is the least-privilege Redis 7 ACL user of actorlock, exactly
// as docs/security.md shows it: every key (lock names
// are the application's own keys), Redisson's channels, and the commands
// actorlock runs, directly or inside its Lua scripts (Redis checks those
// against the calling user too). The tests show that it is enough for every
// primitive (TestACLUserRunsEveryPrimitiveOverTLS, with runPrimitives in
// security_primitives_test.go) and that each grant is needed
// (TestACLEveryGrantIsNeeded, security_acl_test.go).
const aclSetUser = "ACL SETUSER actorlock reset on >PASSWORD ~* resetchannels &redisson_*" +
	" +evalsha +eval +subscribe +unsubscribe +ping +exists +get +hget +hmget +pttl +llen +lpop +lmove +blmove +del" +
	" +time +set +incr +hset +hincrby +hexists +hdel +hlen +hkeys +pexpire +publish" +
	" +lindex +lrange +lrem +lpos +rpush +lpush +ltrim +zadd +zrem +zscore +zrange +zrangebyscore" +
	" +decr +decrby +incrby +setnx +type"

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
// keys and channels to it, as docs/security.md shows; a name outside it is
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
// name starts with "app:" and has no "{" (docs/security.md).
const aclPrefixRules = "~app:* ~{app:* ~redisson_*:{app:* ~actorlock_request:{app:* ~actorlock_runtime:* resetchannels &redisson_*:{app:* &redisson_countdownlatch__channel__{app:*"

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
	sys := actorkit.System(rt)
	owner := spawnProbe(t, sys)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, srv.Stop())
	owner.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "r1", Name: "held", Kind: messages.Kind_KIND_LOCK, WaitMs: 500})
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
	actorkit.System(rt).Root.Stop(owner.pid)
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
			// No runtime record: its write would be a third call.
			rt := newRuntime(t, rdb, actorlock.WithRuntimeRecord(false))
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
