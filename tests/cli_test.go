package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/scripts"
)

// TestCLI runs cmd/actorlock, built once, against one real Redis holding
// objects written by our runtime and the way Redisson writes them.
func TestCLI(t *testing.T) {
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	bin := buildCommand(t, "github.com/actorlock/actorlock/cmd/actorlock")
	url := "redis://" + srv.Addr
	cli := func(args ...string) procResult { return runCLI(t, bin, append([]string{"--url", url}, args...)...) }

	t.Run("inspect lock held by our runtime", func(t *testing.T) {
		held, err := rt.Lock("cli:ours").Acquire(ctx)
		require.NoError(t, err)
		defer held.Unlock(context.Background())
		r := cli("inspect", "cli:ours")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      lock\n")
		assert.Contains(t, r.stdout, held.Owner()+"  1 hold"+thisProcess(t)+"\n", "the holder, and the process its runtime records")
		assert.Regexp(t, `state:\s+held, lease [0-9.]+s left`, r.stdout)
		assert.Contains(t, r.stdout, "token:") // the fencing counter
		assert.Contains(t, r.stdout, itoa(held.Token()))

		// --json carries the same, for scripts.
		r = cli("--json", "inspect", "cli:ours")
		require.Equal(t, 0, r.code, r.stderr)
		var o struct {
			Kind      string `json:"kind"`
			LastToken int64  `json:"last_token"`
			Holders   []struct {
				Owner   string `json:"owner"`
				Holds   int64  `json:"holds"`
				Process struct {
					Host string `json:"host"`
					PID  int    `json:"pid"`
				} `json:"process"`
			} `json:"holders"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), r.stdout)
		assert.Equal(t, "lock", o.Kind)
		assert.Equal(t, held.Token(), o.LastToken)
		require.Len(t, o.Holders, 1)
		assert.Equal(t, held.Owner(), o.Holders[0].Owner)
		assert.Equal(t, int64(1), o.Holders[0].Holds)
		assert.Equal(t, os.Getpid(), o.Holders[0].Process.PID)
	})

	t.Run("inspect lock written by Redisson", func(t *testing.T) {
		require.NoError(t, rdb.HIncrBy(ctx, "cli:java", redissonOwner, 1).Err())
		require.NoError(t, rdb.HIncrBy(ctx, "cli:java", redissonOwner, 1).Err())
		require.NoError(t, rdb.PExpire(ctx, "cli:java", 20*time.Second).Err())
		r := cli("inspect", "cli:java")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      lock\n")
		assert.Contains(t, r.stdout, redissonOwner+"  2 holds\n")
		assert.Contains(t, r.stdout, "token:     none issued")
	})

	t.Run("inspect fair lock with waiters", func(t *testing.T) {
		holder, err := rt.FairLock("cli:fair", actorlock.WithOwner("fair-holder")).Acquire(ctx)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = rt.FairLock("cli:fair", actorlock.WithOwner("fair-waiter")).Acquire(wctx)
		}()
		defer func() { cancel(); <-done; _ = holder.Unlock(context.Background()) }()
		require.Eventually(t, func() bool {
			ws, err := rt.FairLock("cli:fair").Waiters(ctx)
			return err == nil && len(ws) == 1
		}, 10*time.Second, 20*time.Millisecond)
		r := cli("inspect", "cli:fair")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      fair-lock\n")
		assert.Contains(t, r.stdout, "fair-holder  1 hold\n")
		assert.Contains(t, r.stdout, "waiters:   1\n")
		assert.Regexp(t, `1\. fair-waiter  keeps its place until \S+ \S+ \(in [0-9.]+`, r.stdout)
	})

	t.Run("inspect read-write lock with readers", func(t *testing.T) {
		for _, owner := range []string{"reader-a", "reader-b"} {
			h, err := rt.ReadWriteLock("cli:rw", actorlock.WithOwner(owner)).ReadLocker().Acquire(ctx, actorlock.LeaseTime(20*time.Second))
			require.NoError(t, err)
			defer h.Unlock(context.Background())
		}
		r := cli("inspect", "cli:rw")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      read-write-lock\n")
		assert.Contains(t, r.stdout, "held for reading")
		assert.Regexp(t, `reader-a  1 read \[[0-9.]+s left\]`, r.stdout)
		assert.Regexp(t, `reader-b  1 read \[[0-9.]+s left\]`, r.stdout)
	})

	t.Run("inspect permit-expirable semaphore", func(t *testing.T) {
		s := rt.PermitExpirableSemaphore("cli:permits")
		_, err := s.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		id, err := s.Acquire(ctx, 20*time.Second)
		require.NoError(t, err)
		defer s.Release(context.Background(), id)
		r := cli("inspect", "cli:permits")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      permit-expirable-semaphore\n")
		assert.Contains(t, r.stdout, "available: 1 permit\n")
		assert.Contains(t, r.stdout, "taken:     1 permit\n")
		assert.Regexp(t, id+`  expires \S+ \S+ \(in 1\d\.\d+s\)`, r.stdout)
	})

	t.Run("inspect count-down latch and semaphore", func(t *testing.T) {
		latch := rt.CountDownLatch("cli:latch")
		_, err := latch.TrySetCount(ctx, 2)
		require.NoError(t, err)
		// Without a waiter a latch's STRING looks like a semaphore's:
		// --kind says which it is.
		r := cli("inspect", "--kind", "count-down-latch", "cli:latch")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      count-down-latch\n")
		assert.Contains(t, r.stdout, "count:     2\n")
		// A waiter subscribed to the latch's channel tells them apart.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = latch.Await(wctx) }()
		defer func() { cancel(); <-done }()
		require.Eventually(t, func() bool {
			r = cli("inspect", "cli:latch")
			return r.code == 0 && strings.Contains(r.stdout, "kind:      count-down-latch\n")
		}, 10*time.Second, 50*time.Millisecond, "detected as: %s%s", r.stdout, r.stderr)

		_, err = rt.Semaphore("cli:sem").TrySetPermits(ctx, 3)
		require.NoError(t, err)
		r = cli("inspect", "cli:sem")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      semaphore\n")
		assert.Contains(t, r.stdout, "available: 3 permits\n")
		r = cli("inspect", "--kind", "no-such-kind", "cli:sem")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "unknown kind")
	})

	t.Run("queue stats of a delayed queue", func(t *testing.T) {
		q := rt.DelayedQueue("cli:jobs")
		defer q.Close()
		require.NoError(t, q.Offer(ctx, []byte("later"), time.Hour))
		require.NoError(t, q.Offer(ctx, []byte("much later"), 2*time.Hour))
		require.NoError(t, rt.BlockingQueue("cli:jobs").Offer(ctx, []byte("ready")))
		r := cli("queue", "stats", "cli:jobs")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "kind:      delayed-queue\n")
		assert.Contains(t, r.stdout, "ready:     1 item in the list")
		assert.Contains(t, r.stdout, "delayed:   2 items\n")
		assert.Regexp(t, `next due:  \S+ \S+ \(in (59m|1h0m)`, r.stdout)
		r = cli("--json", "queue", "stats", "cli:jobs")
		require.Equal(t, 0, r.code, r.stderr)
		var st struct {
			Delayed int64 `json:"delayed"`
			Ready   int64 `json:"ready"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
		assert.Equal(t, int64(2), st.Delayed)
		assert.Equal(t, int64(1), st.Ready)
	})

	t.Run("list with a pattern uses SCAN", func(t *testing.T) {
		s := rt.Semaphore("cli:list:sem")
		_, err := s.TrySetPermits(ctx, 4)
		require.NoError(t, err)
		held, err := rt.Lock("cli:list:lock").Acquire(ctx)
		require.NoError(t, err)
		defer held.Unlock(context.Background())
		require.NoError(t, rdb.Set(ctx, "cli:other", "x", 0).Err())
		require.NoError(t, rdb.SAdd(ctx, "cli:list:set", "x").Err())
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		r := cli("list", "cli:list:*")
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 2, r.stdout)
		assert.Contains(t, r.stdout, "semaphore")
		assert.Regexp(t, `cli:list:sem\s+4 permits available`, r.stdout)
		assert.Regexp(t, `lock\s+cli:list:lock\s+held by `+held.Owner()+`×1`, r.stdout)
		info, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		assert.Zero(t, commandCalls(info, "keys"), "list must never run KEYS")
		assert.Positive(t, commandCalls(info, "scan"))

		// --all shows what is not ours too; auxiliary keys never show.
		r = cli("list", "--all")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Regexp(t, `cli:list:set\s+not an actorlock/Redisson object`, r.stdout)
		assert.NotContains(t, r.stdout, "redisson_lock_token")
	})

	t.Run("force-unlock needs --yes and wakes our waiter", func(t *testing.T) {
		// The holder is one service, the waiter another (its own runtime),
		// as with a Go and a Java service guarding the same resource. The
		// holder's short watchdog lease makes it notice the loss within
		// a second or two.
		holderRT := newRuntime(t, client(t, srv.Addr), actorlock.WithWatchdog(3*time.Second))
		held, err := holderRT.Lock("cli:stuck").Acquire(ctx)
		require.NoError(t, err)
		got := make(chan *actorlock.Held, 1)
		go func() {
			h, err := rt.Lock("cli:stuck").Acquire(ctx)
			if err == nil {
				got <- h
			}
		}()
		r := cli("force-unlock", "cli:stuck")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "without --yes")
		assert.Contains(t, r.stdout, held.Owner())
		info, err := rt.Lock("cli:stuck").Holders(ctx)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1, "refused: nothing deleted")
		assert.Equal(t, held.Owner(), info.Holders[0].Owner)

		start := time.Now()
		r = cli("force-unlock", "--yes", "cli:stuck")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "force-unlocked lock \"cli:stuck\" (was held by "+held.Owner())
		select {
		case h := <-got:
			// Woken by the unlock message: the holder's lease (3 s,
			// renewed every second) never ran out.
			t.Logf("waiter woken %v after the force-unlock command started", time.Since(start).Round(time.Millisecond))
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.NotEqual(t, held.Owner(), h.Owner())
			require.NoError(t, h.Unlock(ctx))
		case <-time.After(15 * time.Second):
			t.Fatal("the waiter was not woken by the force-unlock")
		}
		select {
		case <-held.Done():
			assert.ErrorIs(t, held.Err(), actorlock.ErrLost)
		case <-time.After(15 * time.Second):
			t.Fatal("the holder never learnt it lost the lock")
		}

		s := rt.Semaphore("cli:stuck:sem")
		_, err = s.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		r = cli("force-unlock", "--yes", "cli:stuck:sem")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, `"cli:stuck:sem" is a semaphore: force-unlock works on locks only`)
	})

	t.Run("fair-drop drops a dead waiter so the live one behind gets the lock", func(t *testing.T) {
		const name = "cli:fairdrop"
		queue, timeouts := fairKeys(name)
		holder, err := rt.FairLock(name).Acquire(ctx)
		require.NoError(t, err)
		// A Redisson waiter whose process died: its place lasts 5 minutes.
		const dead = "7d1bd31d-dead-redisson:1"
		require.NoError(t, rdb.ZAdd(ctx, timeouts, redis.Z{Score: float64(time.Now().Add(5 * time.Minute).UnixMilli()), Member: dead}).Err())
		require.NoError(t, rdb.RPush(ctx, queue, dead).Err())
		got := make(chan error, 1)
		go func() {
			h, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(30*time.Second))
			if err == nil {
				err = h.Unlock(ctx)
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 2 }, 5*time.Second, time.Millisecond)
		require.NoError(t, holder.Unlock(ctx))

		r := cli("fair-drop", name)
		assert.Equal(t, 2, r.code, "neither OWNERs nor --all")
		r = cli("fair-drop", name, dead)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "without --yes")
		assert.Contains(t, r.stdout, dead)
		assert.Equal(t, int64(2), rdb.LLen(ctx, queue).Val(), "refused: nothing dropped")
		select {
		case err := <-got:
			t.Fatalf("the live waiter passed the dead one: %v", err)
		default:
		}

		start := time.Now()
		r = cli("fair-drop", "--yes", name, dead)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `dropped waiter "`+dead+`" of fair lock "`+name+`"`)
		select {
		case err := <-got:
			require.NoError(t, err)
			t.Logf("the live waiter got the lock %v after fair-drop started", time.Since(start).Round(time.Millisecond))
			assert.Less(t, time.Since(start), 2*time.Second, "told by the drop")
		case <-time.After(15 * time.Second):
			t.Fatal("the live waiter did not get the lock after the drop")
		}
		r = cli("fair-drop", "--yes", "cli:stuck:sem", "x")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "fair-drop works on fair locks only")
	})

	t.Run("watch prints each change", func(t *testing.T) {
		l := rt.Lock("cli:watched")
		changes := make(chan string, 1)
		go func() {
			time.Sleep(1 * time.Second)
			h, err := l.Acquire(ctx)
			if err != nil {
				changes <- err.Error()
				return
			}
			changes <- h.Owner()
			time.Sleep(1 * time.Second)
			_ = h.Unlock(ctx)
		}()
		start := time.Now()
		r := cli("watch", "--for", "3500ms", "--interval", "200ms", "cli:watched")
		require.Equal(t, 0, r.code, r.stderr)
		elapsed := time.Since(start)
		assert.GreaterOrEqual(t, elapsed, 3500*time.Millisecond)
		assert.Less(t, elapsed, 15*time.Second, "--for stops it")
		owner := <-changes
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 3, "free, held, free again; only changes are printed:\n%s", r.stdout)
		assert.Contains(t, lines[0], "nothing stored under this name (free)")
		assert.Contains(t, lines[1], "held by "+owner+"×1")
		assert.Regexp(t, `^\S+ free$`, lines[2])
		assert.NotContains(t, r.stdout, "\x1b[", "no cursor movement when not on a terminal")
	})

	// A lock Redisson took twice, without expiry: a view that stays put.
	require.NoError(t, rdb.HIncrBy(ctx, "cli:watch:java", redissonOwner, 2).Err())

	t.Run("watch stops on Ctrl-C", func(t *testing.T) {
		cmd := exec.Command(bin, "--url", url, "watch", "cli:watch:java")
		var stdout lockedBuffer
		cmd.Stdout = &stdout
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		require.Eventually(t, func() bool { return strings.Contains(stdout.String(), redissonOwner) },
			10*time.Second, 20*time.Millisecond, "watch showed nothing: %s", &stdout)
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		select {
		case err := <-exited:
			assert.NoError(t, err, "Ctrl-C is the normal way to stop watching")
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Fatal("watch did not stop on Ctrl-C")
		}
	})

	t.Run("watch redraws in place on a terminal", func(t *testing.T) {
		// util-linux script(1) runs the command on a pseudo-terminal.
		script, err := exec.LookPath("script")
		if err != nil {
			t.Skip("no script(1) to give watch a terminal")
		}
		line := strings.Join([]string{bin, "--url", url, "watch", "--for", "1200ms", "--interval", "200ms", "cli:watch:java"}, " ")
		out, err := exec.Command(script, "-qec", line, "/dev/null").Output()
		require.NoError(t, err, "%s", out)
		frames := strings.Split(string(out), "\x1b[6F\x1b[J") // back to the first of 6 lines, clear
		assert.GreaterOrEqual(t, len(frames), 4, "one view redrawn every 200 ms for 1.2 s:\n%q", out)
		for _, f := range frames {
			assert.Contains(t, f, redissonOwner+"  2 holds")
		}
	})

	t.Run("errors", func(t *testing.T) {
		// A URL that is no URL, or not Redis's: exit 2.
		r := runCLI(t, bin, "--url", "http://"+srv.Addr, "inspect", "x")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, `scheme "http", want redis:// or rediss://`)
		r = runCLI(t, bin, "--url", "redis://:Secr/et42@"+srv.Addr, "inspect", "x")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "invalid --url")
		assert.NotContains(t, r.stderr+r.stdout, "Secr")
		r = runCLI(t, bin, "--url", "redis://"+srv.Addr+"/notadb", "inspect", "x")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "invalid --url")
		r = cli("inspect")
		assert.Equal(t, 2, r.code, "no name")
		r = cli("frobnicate", "x")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, `unknown command "frobnicate"`)

		// A refused password: exit 1, and the password is never shown.
		require.NoError(t, rdb.Do(ctx, "acl", "setuser", "operator", "on", ">RightPass1", "~*", "&*", "+@all").Err())
		r = runCLI(t, bin, "--url", "redis://operator:WrongPass9@"+srv.Addr, "inspect", "cli:watch:java")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "authentication refused by "+srv.Addr)
		assert.NotContains(t, r.stderr+r.stdout, "WrongPass9")
		r = runCLI(t, bin, "--url", "redis://operator:RightPass1@"+srv.Addr, "inspect", "cli:watch:java")
		assert.Equal(t, 0, r.code, r.stderr)
		assert.NotContains(t, r.stderr+r.stdout, "RightPass1")

		// Nothing listening: exit 1.
		r = runCLI(t, bin, "--url", "redis://127.0.0.1:1", "--timeout", "2s", "inspect", "x")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "cannot reach Redis at 127.0.0.1:1")

		// Names that are no lock: exit 1.
		require.NoError(t, rdb.SAdd(ctx, "cli:aset", "m").Err())
		require.NoError(t, rdb.HSet(ctx, "cli:texthash", "f", "hello").Err())
		for _, name := range []string{"cli:aset", "cli:texthash"} {
			r = cli("inspect", name)
			assert.Equal(t, 1, r.code, name)
			assert.Contains(t, r.stderr, `"`+name+`" is not an actorlock/Redisson object`)
		}
		r = cli("force-unlock", "--yes", "cli:aset")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "not an actorlock/Redisson object")
		assert.Equal(t, int64(1), rdb.Exists(ctx, "cli:aset").Val(), "left alone")
		r = cli("queue", "stats", "cli:watch:java")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, `"cli:watch:java" is not a delayed-queue`)
		r = cli("inspect", "cli:nothing-here")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "no such lock")
	})
	t.Run("holders show their process", func(t *testing.T) {
		// A runtime records its host and pid under its id, in its key
		// prefix's namespace, with a TTL; the CLI finds it for a holder.
		app := newRuntime(t, client(t, srv.Addr), actorlock.WithKeyPrefix("cliapp:"))
		key := scripts.RuntimeKey("cliapp:", app.ID())
		require.Eventually(t, func() bool { return rdb.Exists(ctx, key).Val() == 1 }, 10*time.Second, 10*time.Millisecond)
		var rec struct {
			Host string
			PID  int
		}
		require.NoError(t, json.Unmarshal([]byte(rdb.Get(ctx, key).Val()), &rec))
		host, err := os.Hostname()
		require.NoError(t, err)
		assert.Equal(t, host, rec.Host)
		assert.Equal(t, os.Getpid(), rec.PID)
		ttl := rdb.PTTL(ctx, key).Val()
		assert.True(t, ttl > 0 && ttl <= 30*time.Second, "the record expires unless refreshed (PTTL %v)", ttl)

		held, err := app.Lock("orders").Acquire(ctx)
		require.NoError(t, err)
		r := cli("inspect", "cliapp:orders")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, held.Owner()+"  1 hold"+thisProcess(t)+"\n")
		r = cli("list", "cliapp:*")
		require.Equal(t, 0, r.code, r.stderr)
		assert.NotContains(t, r.stdout, "actorlock_runtime", "the record is no object")
		assert.Contains(t, r.stdout, "held by "+held.Owner()+"×1 ("+host+" pid ")
		require.NoError(t, held.Unlock(ctx))

		// Close deletes it.
		require.NoError(t, app.Close(ctx))
		assert.Zero(t, rdb.Exists(ctx, key).Val(), "the record outlived Close")
	})

	t.Run("rough edges of issue 26", func(t *testing.T) {
		// list --json with no match is an empty array, which jq '.[]' takes.
		r := cli("--json", "list", "cli:matches-nothing:*")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "[]\n", r.stdout)

		// queue stats of a name that holds nothing says so, as inspect does.
		r = cli("queue", "stats", "cli:no-such-queue")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, `"cli:no-such-queue": no such lock, semaphore, latch or queue`)
		assert.Empty(t, r.stdout)

		// watch --help describes watch's own flags: it has no --json.
		r = cli("watch", "--help")
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stderr, "usage: actorlock watch [flags] NAME\n  live holders and waiters")
		assert.NotContains(t, r.stderr, "-json")
		r = cli("--json", "watch", "--for", "1s", "cli:ours")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "watch has no JSON output")
		r = cli("list", "--help")
		assert.Contains(t, r.stderr, "print the objects as a JSON array ([] when none matches)")

		// A refused password names where the URL came from.
		require.NoError(t, rdb.Do(ctx, "acl", "setuser", "envop", "on", ">RightPass2", "~*", "&*", "+@all").Err())
		r = runCLIEnv(t, bin, "redis://envop:WrongPass8@"+srv.Addr, "inspect", "cli:ours")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "check the user and password in ACTORLOCK_URL")
		assert.NotContains(t, r.stderr+r.stdout, "WrongPass8")
		r = runCLIEnv(t, bin, "http://"+srv.Addr, "inspect", "cli:ours")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, `invalid ACTORLOCK_URL: scheme "http"`)
		r = runCLI(t, bin, "--url", "redis://envop:WrongPass8@"+srv.Addr, "inspect", "cli:ours")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "check the user and password in --url")
	})
}

// thisProcess is how the CLI shows a holder whose runtime runs in this
// test process.
func thisProcess(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	require.NoError(t, err)
	return fmt.Sprintf("  (host %s, pid %d)", host, os.Getpid())
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func runCLI(t *testing.T, bin string, args ...string) procResult {
	t.Helper()
	return runCLIEnv(t, bin, "", args...)
}

// runCLIEnv runs the CLI with ACTORLOCK_URL set to url ("": unset).
func runCLIEnv(t *testing.T, bin, url string, args ...string) procResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cmd.Environ(), "ACTORLOCK_URL="+url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return procResult{code: exitCode(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
}

// TestCLIDeployments: the CLI reaches a Redis Cluster (list SCANs every
// master; force-unlock announces on the channel the runtimes listen to,
// sharded on Redis 7), a master behind Sentinel, and a TLS server that
// wants a client certificate.
func TestCLIDeployments(t *testing.T) {
	bin := buildCommand(t, "github.com/actorlock/actorlock/cmd/actorlock")
	ctx := ctxFor(t, 60*time.Second)

	t.Run("cluster", func(t *testing.T) {
		d := startDeployment(t, "cluster")
		rdb, rt := d.setup(t)
		url := "redis://" + d.cluster.Addrs()[0]
		for _, a := range d.cluster.Addrs()[1:] {
			url += map[bool]string{true: "?", false: "&"}[!strings.Contains(url, "?")] + "addr=" + a
		}
		cli := func(args ...string) procResult {
			return runCLI(t, bin, append([]string{"--cluster", "--url", url}, args...)...)
		}
		// Names spread over the slots, so over the three masters.
		names := []string{"cl:a", "cl:b", "cl:c", "cl:d", "cl:e", "cl:f"}
		masters := map[string]bool{}
		var helds []*actorlock.Held
		for _, n := range names {
			h, err := rt.Lock(n).Acquire(ctx)
			require.NoError(t, err)
			helds = append(helds, h)
			m, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, n)
			require.NoError(t, err)
			masters[m.Options().Addr] = true
		}
		require.Greater(t, len(masters), 1, "the names should land on several masters")
		r := cli("list", "cl:*")
		require.Equal(t, 0, r.code, r.stderr)
		for i, n := range names {
			assert.Regexp(t, `lock\s+`+n+`\s+held by `+helds[i].Owner(), r.stdout)
		}

		// The waiter is another service, with its own runtime.
		_, other := d.setup(t)
		got := make(chan *actorlock.Held, 1)
		go func() {
			h, err := other.Lock("cl:a").Acquire(ctx)
			if err == nil {
				got <- h
			}
		}()
		r = cli("inspect", "cl:a")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, helds[0].Owner()+"  1 hold"+thisProcess(t)+"\n")
		start := time.Now()
		r = cli("force-unlock", "--yes", "cl:a")
		require.Equal(t, 0, r.code, r.stderr)
		select {
		case h := <-got:
			assert.Less(t, time.Since(start), 5*time.Second, "woken by the message, not the 30 s lease")
			require.NoError(t, h.Unlock(ctx))
		case <-time.After(20 * time.Second):
			t.Fatal("the waiter was not woken by the force-unlock")
		}
		for _, h := range helds[1:] {
			require.NoError(t, h.Unlock(ctx))
		}
	})

	t.Run("sentinel", func(t *testing.T) {
		master := startRedis(t)
		sentinel, err := redisserver.StartSentinel(master, "locks", time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sentinel.Close() })
		rdb := client(t, master.Addr)
		require.NoError(t, rdb.HIncrBy(ctx, "sentinel:lock", redissonOwner, 1).Err())
		require.NoError(t, rdb.PExpire(ctx, "sentinel:lock", 20*time.Second).Err())
		r := runCLI(t, bin, "--sentinel-master", "locks", "--url", "redis://"+sentinel.Addr, "inspect", "sentinel:lock")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, redissonOwner+"  1 hold\n")
		r = runCLI(t, bin, "--sentinel-master", "nosuchmaster", "--timeout", "2s", "--url", "redis://"+sentinel.Addr, "inspect", "sentinel:lock")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "cannot reach Redis")
	})

	t.Run("tls", func(t *testing.T) {
		srv, err := redisserver.StartTLS()
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		tlsConf, err := srv.Certs.ClientConfig()
		require.NoError(t, err)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, TLSConfig: tlsConf})
		t.Cleanup(func() { _ = rdb.Close() })
		require.NoError(t, rdb.HIncrBy(ctx, "tls:lock", redissonOwner, 1).Err())
		url := "rediss://" + srv.Addr
		c := srv.Certs
		r := runCLI(t, bin, "--url", url, "--cacert", c.CA, "--cert", c.ClientCert, "--key", c.ClientKey, "inspect", "tls:lock")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, redissonOwner+"  1 hold\n")
		r = runCLI(t, bin, "--url", url, "--cert", c.ClientCert, "--key", c.ClientKey, "inspect", "tls:lock")
		assert.Equal(t, 1, r.code, "a server certificate of an unknown CA")
		assert.Contains(t, r.stderr, "cannot reach Redis at "+srv.Addr)
		assert.Contains(t, r.stderr, "certificate")
		r = runCLI(t, bin, "--url", "redis://"+srv.Addr, "--cacert", c.CA, "inspect", "tls:lock")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "use a rediss:// URL")
	})
}
