package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/remoting"
)

// The remote tests run owners in child processes (workers_remote_test.go)
// that lock with this process's runtime over protoactor remote on
// loopback. They are not parallel, and none runs two remotes at once in
// this process: gRPC keeps its logger in an unguarded global that
// protoactor sets whenever a remote starts, while the gRPC goroutines of any
// other remote read it.

// remoteSetup starts Redis and a runtime reachable over remote on
// 127.0.0.1 with watchdog lease lease.
func remoteSetup(t *testing.T, lease time.Duration, opts ...actorlock.Option) (*redisserver.Server, *redis.Client, *actorlock.Runtime) {
	t.Helper()
	opts = append([]actorlock.Option{actorlock.WithWatchdog(lease), remoting.WithRemote(remoting.Config{})}, opts...)
	srv, rdb, rt := setup(t, opts...)
	require.NotEmpty(t, actorkit.RemoteAddress(rt))
	require.True(t, strings.HasPrefix(actorkit.RemoteAddress(rt), "127.0.0.1:"), "loopback by default: %s", actorkit.RemoteAddress(rt))
	return srv, rdb, rt
}

// remoteEnv is the environment of a worker that talks to rt.
func remoteEnv(srv *redisserver.Server, rt *actorlock.Runtime, extra map[string]string) map[string]string {
	env := map[string]string{"REDIS_ADDR": srv.Addr, "SERVER_ADDR": actorkit.RemoteAddress(rt)}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// grant is what a remote owner printed on ACQUIRED.
type grant struct {
	token, owner string
	fencing      int64
	ttl          time.Duration
	at           time.Time // when the test read it
}

func acquired(t *testing.T, w *worker) grant {
	t.Helper()
	f := strings.Fields(w.expect(t, "ACQUIRED ", 10*time.Second))
	require.Len(t, f, 4)
	fencing, _ := strconv.ParseInt(f[2], 10, 64)
	ttl, _ := strconv.ParseInt(f[3], 10, 64)
	return grant{token: f[0], owner: f[1], fencing: fencing, ttl: time.Duration(ttl) * time.Millisecond, at: time.Now()}
}

// assertHolder checks that owner alone holds name in Redis, once.
func assertHolder(t *testing.T, rdb *redis.Client, name, owner string) {
	t.Helper()
	fields, err := rdb.HGetAll(context.Background(), name).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{owner: "1"}, ownersOf(fields), "who holds %q", name)
}

// waitFree polls until name is gone from Redis and returns when it saw it.
func waitFree(t *testing.T, rdb *redis.Client, name string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if rdb.Exists(context.Background(), name).Val() == 0 {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%q still held after %v", name, within)
	return time.Time{}
}

func TestRemoteOwnerHoldsWhileRenewingAndIsReleasedWhenKilled(t *testing.T) {
	const lease = 2 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	named := actorkit.NamedPID(rt)
	require.NotNil(t, named)
	assert.Equal(t, actorkit.RemoteAddress(rt), named.Address)
	assert.Equal(t, actorkit.DefaultRemoteName, named.Id)

	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-kill"}))
	g := acquired(t, w)
	want, err := actorkit.TokenOwner(rt, g.token)
	require.NoError(t, err)
	assert.Equal(t, want, g.owner, "the owner is the token's")
	assert.Equal(t, lease, g.ttl)
	assertHolder(t, rdb, "remote-kill", g.owner)

	// Its keeper proves it alive: held well past the lease.
	time.Sleep(2 * lease)
	assertHolder(t, rdb, "remote-kill", g.owner)

	require.NoError(t, w.cmd.Process.Kill())
	killed := time.Now()
	freed := waitFree(t, rdb, "remote-kill", lease+3*time.Second)
	t.Logf("a SIGKILLed remote owner's lock was free %v after the kill (lease %v)", freed.Sub(killed), lease)
	assert.LessOrEqual(t, freed.Sub(killed), lease+time.Second)
}

func TestRemoteOwnerFrozenLosesItsLockAfterTheLease(t *testing.T) {
	const lease = 2 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-freeze"}))
	g := acquired(t, w)
	time.Sleep(lease) // a few renewals
	assertHolder(t, rdb, "remote-freeze", g.owner)

	// Frozen, the process is gone for the node, but its TCP connections
	// stay open, so no Terminated comes.
	require.NoError(t, w.cmd.Process.Signal(sigStop))
	frozen := time.Now()
	t.Cleanup(func() { _ = w.cmd.Process.Signal(sigCont) })
	freed := waitFree(t, rdb, "remote-freeze", lease+3*time.Second)
	elapsed := freed.Sub(frozen)
	t.Logf("a frozen remote owner's lock was free %v after the freeze (lease %v)", elapsed, lease)
	// Its last renewal came at most lease/3 before the freeze: released a
	// lease after it, not before.
	assert.GreaterOrEqual(t, elapsed, lease*2/3-100*time.Millisecond)
	assert.LessOrEqual(t, elapsed, lease+time.Second)

	// Running again, it hears that it lost the lock: from its own keeper,
	// whose deadline passed while it was frozen, or from the runtime.
	require.NoError(t, w.cmd.Process.Signal(sigCont))
	assert.Regexp(t, "keeper had no renewal confirmed|no RenewRequest", w.expect(t, "LOST ", 3*time.Second))
}

// cutOff is a runtime and a remote owner (worker mode remote-owner, with
// env) that reach each other only through proxies the test can cut: the
// owner's requests reach the runtime at the address it advertises, a proxy
// in front of it; the runtime answers the owner's node at the address that
// node advertises, a proxy in front of it.
type cutOff struct {
	rdb                *redis.Client
	rt                 *actorlock.Runtime
	owner              *worker
	toRuntime, toOwner *cutProxy
}

func startCutOff(t *testing.T, env map[string]string, opts ...actorlock.Option) cutOff {
	t.Helper()
	port, err := redisserver.FreePort()
	require.NoError(t, err)
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := cutOff{toRuntime: startCutProxy(t, listen)}
	var srv *redisserver.Server
	srv, c.rdb, c.rt = setup(t, append(opts, remoting.WithRemote(remoting.Config{Addr: listen, AdvertisedAddr: c.toRuntime.Addr()}))...)
	require.Equal(t, c.toRuntime.Addr(), actorkit.RemoteAddress(c.rt))
	ownerPort, err := redisserver.FreePort()
	require.NoError(t, err)
	c.toOwner = startCutProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ownerPort)))
	c.owner = spawn(t, "remote-owner", remoteEnv(srv, c.rt, with(env, map[string]string{
		"NODE_PORT": strconv.Itoa(ownerPort), "NODE_ADVERTISED": c.toOwner.Addr()})))
	require.Equal(t, c.toOwner.Addr(), c.owner.expect(t, "NODE ", 10*time.Second))
	return c
}

// cut stops both directions.
func (c cutOff) cut() {
	c.toRuntime.Cut()
	c.toOwner.Cut()
}

func TestRemoteOwnerBehindACutNetworkLosesItsLockAfterTheLease(t *testing.T) {
	const lease = 2 * time.Second
	c := startCutOff(t, map[string]string{"LOCK_NAME": "remote-cut"}, actorlock.WithWatchdog(lease))
	rdb, w := c.rdb, c.owner
	g := acquired(t, w)
	time.Sleep(lease + lease/6) // renewals through the proxies; cut between two
	assertHolder(t, rdb, "remote-cut", g.owner)

	c.cut()
	cut := time.Now()
	// Nothing crosses the cut, but the owner's keeper, whose renewals are no
	// longer confirmed, tells it the lock is lost, before the runtime can
	// let anyone else in.
	lostAt := make(chan time.Time, 1)
	go func() {
		line := w.expect(t, "LOST ", lease+3*time.Second)
		assert.Contains(t, line, "keeper", "told by its own keeper")
		lostAt <- time.Now()
	}()
	freed := waitFree(t, rdb, "remote-cut", lease+3*time.Second)
	elapsed := freed.Sub(cut)
	t.Logf("a remote owner cut off by the network lost its lock %v after the cut (lease %v)", elapsed, lease)
	// As for a frozen owner: its last renewal came at most lease/3 before.
	assert.GreaterOrEqual(t, elapsed, lease*2/3-100*time.Millisecond)
	assert.LessOrEqual(t, elapsed, lease+time.Second)
	told := <-lostAt
	t.Logf("the owner was told %v after the cut, %v before the lock was free", told.Sub(cut), freed.Sub(told))
	// The keeper's deadline comes a drift allowance before the runtime's; the
	// test sees both through a pipe and a poll, hence the tolerance.
	assert.False(t, told.After(freed.Add(100*time.Millisecond)), "told no later than the lock was free")
}

// A keeper given no lease learns the runtime's from its renewals: with a
// 2 s watchdog lease it renews every 2/3 s (a guess of 30 s, as before,
// renewed every 10 s and lost the lock after 2 s).
func TestRemoteKeeperWithoutALeaseLearnsTheRuntimes(t *testing.T) {
	const lease = 2 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-learn", "KEEP_LEASE": "0"}))
	g := acquired(t, w)
	time.Sleep(3 * lease)
	assertHolder(t, rdb, "remote-learn", g.owner)
	for {
		select {
		case line := <-w.lines:
			assert.NotContains(t, line, "LOST", "held for three leases")
			continue
		default:
		}
		break
	}
}

func TestRemoteOwnerThatSendsNoRenewalsIsReleasedAfterTheLease(t *testing.T) {
	const lease = 2 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-nokeep", "KEEP": "0"}))
	g := acquired(t, w)
	assertHolder(t, rdb, "remote-nokeep", g.owner)
	freed := waitFree(t, rdb, "remote-nokeep", lease+3*time.Second)
	elapsed := freed.Sub(g.at)
	t.Logf("an owner that sent no RenewRequest lost its lock %v after its grant (lease %v)", elapsed, lease)
	assert.GreaterOrEqual(t, elapsed, lease-200*time.Millisecond, "not before the lease")
	assert.LessOrEqual(t, elapsed, lease+time.Second)
	assert.Contains(t, w.expect(t, "LOST ", 2*time.Second), "no RenewRequest", "the live owner is told")
}

func TestRemoteOwnerThatStopsIsReleasedWithinHalfALease(t *testing.T) {
	const lease = 3 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	// The keeper is the owner's child: it stops with it.
	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-stop", "STOP_OWNER_MS": "500"}))
	g := acquired(t, w)
	assertHolder(t, rdb, "remote-stop", g.owner)
	w.expect(t, "STOPPED", 3*time.Second)
	stopped := time.Now()
	freed := waitFree(t, rdb, "remote-stop", lease+3*time.Second)
	elapsed := freed.Sub(stopped)
	t.Logf("a remote owner that stopped lost its lock %v after (lease %v)", elapsed, lease)
	// Its Terminated brought the deadline forward to half a lease (from a
	// whole lease after the last renewal, at least 2/3 of it from now), but
	// did not release at once: it could have been forged.
	assert.GreaterOrEqual(t, elapsed, lease/2-150*time.Millisecond)
	assert.Less(t, elapsed, lease*2/3-100*time.Millisecond)
}

func TestRemoteOwnerKeepsItsLockWhileItsTokenIsRenewedWhateverTerminatedSays(t *testing.T) {
	const lease = 2 * time.Second
	srv, rdb, rt := remoteSetup(t, lease)
	// The owner actor stops (so the node gets a genuine Terminated), while
	// a keeper outside it keeps renewing its token: for a remote owner, a
	// Terminated proves nothing (any peer can send one) and the renewals
	// prove it alive.
	w := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{
		"LOCK_NAME": "remote-terminated", "SEPARATE_KEEPER": "1", "STOP_OWNER_MS": "200",
	}))
	g := acquired(t, w)
	w.expect(t, "STOPPED", 3*time.Second)
	time.Sleep(2 * lease)
	assertHolder(t, rdb, "remote-terminated", g.owner)
}

func TestRemoteSpoofingIsRefused(t *testing.T) {
	const lease = 2 * time.Second
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, rdb, rt := remoteSetup(t, lease, actorlock.WithLogger(logger))
	victim := spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-spoof"}))
	pid := strings.Fields(victim.expect(t, "OWNER ", 10*time.Second))
	require.Len(t, pid, 2)
	g := acquired(t, victim)

	s := spawn(t, "remote-spoof", remoteEnv(srv, rt, map[string]string{
		"LOCK_NAME": "remote-spoof", "VICTIM_OWNER": g.owner, "VICTIM_ADDR": pid[0], "VICTIM_ID": pid[1],
	}))
	steps := map[string][]string{}
	for _, line := range s.untilDone(t, 30*time.Second) {
		if rest, ok := strings.CutPrefix(line, "STEP "); ok {
			f := strings.SplitN(rest, " ", 4)
			steps[f[0]] = f[1:]
		}
	}
	for _, label := range []string{"release-none", "release-wrong", "renew-none", "renew-wrong", "cancel-none", "cancel-wrong"} {
		require.Contains(t, steps, label)
		assert.Equal(t, "ERROR_CODE_NOT_OWNER", steps[label][0], label)
		assert.NotContains(t, strings.Join(steps[label], " "), g.token, "%s: the token is never echoed", label)
	}
	for _, label := range []string{"release-named", "acquire-named"} {
		require.Contains(t, steps, label)
		assert.Equal(t, "ERROR_CODE_INVALID_ARGUMENT", steps[label][0], "%s: naming the owner id is refused", label)
	}
	// The releases sent in the victim's name were refused too (the replies
	// went to the victim, who prints them).
	for range 2 {
		assert.Equal(t, "ERROR_CODE_NOT_OWNER", victim.expect(t, "GOT ReleaseResponse ", 3*time.Second))
	}
	assertHolder(t, rdb, "remote-spoof", g.owner)
	ttl, err := rdb.PTTL(context.Background(), "remote-spoof").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, lease/2, "still renewed")

	// The runtime's PID survived the Stop and PoisonPill, and the right
	// token works, from any actor.
	good := spawn(t, "remote-spoof", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "remote-spoof", "GOOD_TOKEN": g.token}))
	f := strings.Fields(good.expect(t, "STEP release-good ", 10*time.Second))
	require.GreaterOrEqual(t, len(f), 2)
	assert.Equal(t, []string{"ERROR_CODE_UNSPECIFIED", "true"}, f[:2])
	assert.Zero(t, rdb.Exists(context.Background(), "remote-spoof").Val(), "released")
	// The victim's keeper learns it at its next renewal.
	assert.Equal(t, "ERROR_CODE_NOT_OWNER", victim.expect(t, "RENEWFAIL ", lease))

	assert.NotEmpty(t, logs.String(), "the runtime did log (at debug level)")
	assert.NotContains(t, logs.String(), g.token, "no owner token in any log line")
}

func TestRemoteRequestsAreValidated(t *testing.T) {
	srv, _, rt := remoteSetup(t, 2*time.Second)
	w := spawn(t, "remote-validate", remoteEnv(srv, rt, nil))
	n := 0
	for _, line := range w.untilDone(t, 30*time.Second) {
		rest, ok := strings.CutPrefix(line, "CASE ")
		if !ok {
			continue
		}
		n++
		f := strings.Fields(rest)
		require.Len(t, f, 3, line)
		assert.Equal(t, "ERROR_CODE_INVALID_ARGUMENT", f[1], f[0])
		if f[0] == "request-id-oversized" {
			assert.Equal(t, "0", f[2], "an oversized request id is not sent back")
		}
	}
	assert.Equal(t, 19, n, "every case answered")
	st, err := rt.Stats(ctxFor(t, time.Second))
	require.NoError(t, err)
	assert.Zero(t, st.LockActors, "nothing was spawned for them")
	assert.Zero(t, st.DelayedQueueMovers)
}

func TestRemoteOverMutualTLS(t *testing.T) {
	// The node and its owners share one CA; the rogue's is another.
	certs, err := redisserver.NewCerts(t.TempDir())
	require.NoError(t, err)
	rogue, err := redisserver.NewCerts(t.TempDir())
	require.NoError(t, err)
	pool, err := certs.Pool()
	require.NoError(t, err)
	node, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	require.NoError(t, err)
	rogueCert, err := tls.LoadX509KeyPair(rogue.ClientCert, rogue.ClientKey)
	require.NoError(t, err)

	tlsCfg := &remoting.TLS{
		Server: &tls.Config{Certificates: []tls.Certificate{node}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
		Client: &tls.Config{Certificates: []tls.Certificate{node}, RootCAs: pool},
	}
	const lease = 2 * time.Second
	srv, rdb, rt := setup(t, actorlock.WithWatchdog(lease), remoting.WithRemote(remoting.Config{TLS: tlsCfg}))
	env := func(extra map[string]string) map[string]string {
		e := remoteEnv(srv, rt, extra)
		e["TLS_CA"] = certs.CA
		return e
	}

	// A peer with a certificate of the CA acquires, and keeps it.
	w := spawn(t, "remote-owner", env(map[string]string{
		"LOCK_NAME": "tls-lock", "TLS_CERT": certs.ClientCert, "TLS_KEY": certs.ClientKey,
	}))
	g := acquired(t, w)
	assertHolder(t, rdb, "tls-lock", g.owner)
	time.Sleep(lease + lease/2)
	assertHolder(t, rdb, "tls-lock", g.owner)

	// Peers without a valid client certificate get nowhere: one of another
	// CA, one with none, one in plaintext.
	bad := []*worker{
		spawn(t, "remote-owner", env(map[string]string{"LOCK_NAME": "tls-rogue", "RESPONSE_TIMEOUT_MS": "3000",
			"TLS_CERT": rogue.ClientCert, "TLS_KEY": rogue.ClientKey})),
		spawn(t, "remote-owner", env(map[string]string{"LOCK_NAME": "tls-nocert", "RESPONSE_TIMEOUT_MS": "3000", "TLS_NOCERT": "1"})),
		spawn(t, "remote-owner", remoteEnv(srv, rt, map[string]string{"LOCK_NAME": "tls-plain", "RESPONSE_TIMEOUT_MS": "3000"})),
	}
	for _, b := range bad {
		b.expect(t, "NO_RESPONSE", 10*time.Second)
	}
	for _, name := range []string{"tls-rogue", "tls-nocert", "tls-plain"} {
		// Not even acquired and released since: no fencing counter, no
		// unlock latch.
		assert.Empty(t, rdb.Keys(context.Background(), "*"+name+"*").Val(), name)
	}

	// The same at the TLS level: the handshake is refused without a client
	// certificate of the CA.
	for _, presented := range [][]tls.Certificate{nil, {rogueCert}} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", actorkit.RemoteAddress(rt),
			&tls.Config{RootCAs: pool, Certificates: presented})
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tls:", "refused by TLS, not timed out")
	}
}

func TestRemoteConfigIsChecked(t *testing.T) {
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	for _, rc := range []remoting.Config{
		{Addr: "0.0.0.0:0"},
		{Addr: ":7070"},
		{Addr: "[::]:7070"},
		{Addr: "0.0.0.0:7070", AllInterfaces: true}, // no AdvertisedAddr
		{Addr: "127.0.0.1:0", AdvertisedAddr: "node1:7070"},
		{Addr: "127.0.0.1"},
		{TLS: &remoting.TLS{}},
		{TLS: &remoting.TLS{Server: &tls.Config{Certificates: []tls.Certificate{{}}}, Client: &tls.Config{Certificates: []tls.Certificate{{}}}}},
	} {
		_, err := actorlock.New(rdb, remoting.WithRemote(rc))
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "%+v", rc)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	_, err := actorlock.New(rdb, actorkit.WithActorSystem(sys), remoting.WithRemote(remoting.Config{}))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "WithRemote starts the runtime's own system's remote")
	sys.Shutdown()

	// A taken port is an error, not a panic. (Taken by a plain listener: a
	// second remote in this process would race on gRPC's global logger.)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	_, err = actorlock.New(rdb, remoting.WithRemote(remoting.Config{Addr: lis.Addr().String()}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), lis.Addr().String())
}

func TestProtocolMessagesCrossTheWire(t *testing.T) {
	// protoactor remote deserializes by the protobuf full name in the global
	// registry: every message of the protocol must be found there and
	// survive the round trip.
	token := actorkit.NewOwnerToken()
	for _, fd := range []protoreflect.FileDescriptor{messages.File_lock_proto, messages.File_queue_proto} {
		for i := range fd.Messages().Len() {
			md := fd.Messages().Get(i)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			require.NoError(t, err, md.FullName())
			m := mt.New()
			plain := 0 // fields that show the value in a log line
			for _, f := range []protoreflect.Name{"request_id", "name", "owner_token"} {
				if fdesc := md.Fields().ByName(f); fdesc != nil {
					m.Set(fdesc, protoreflect.ValueOfString(token))
					if f != "owner_token" {
						plain++
					}
				}
			}
			data, typeName, err := remote.Serialize(m.Interface(), 0)
			require.NoError(t, err, md.FullName())
			back, err := remote.Deserialize(data, typeName, 0)
			require.NoError(t, err, md.FullName())
			assert.True(t, proto.Equal(m.Interface(), back.(proto.Message)), md.FullName())

			// Logged with slog, a message shows no owner token.
			if md.Fields().ByName("owner_token") != nil {
				var buf bytes.Buffer
				slog.New(slog.NewTextHandler(&buf, nil)).Info("x", slog.Any("message", m.Interface()))
				assert.Contains(t, buf.String(), "[redacted]", md.FullName())
				assert.Equal(t, plain, strings.Count(buf.String(), token), "%s: all but owner_token: %s", md.FullName(), buf.String())
			}
		}
	}
}

// untilDone collects a worker's lines up to "DONE".
func (w *worker) untilDone(t *testing.T, within time.Duration) []string {
	t.Helper()
	var lines []string
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-w.lines:
			require.True(t, ok, "worker exited before DONE")
			if line == "DONE" {
				return lines
			}
			lines = append(lines, line)
		case <-deadline:
			t.Fatalf("worker not DONE within %v", within)
		}
	}
}
