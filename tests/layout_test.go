package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

var updateLayout = flag.Bool("update-layout", false, "rewrite testdata/redis-layout.golden from what the primitives write (then name its digest in CHANGELOG.md)")

const layoutGolden = "testdata/redis-layout.golden"

// Issue 32 item 6: the Redis layout is a promise (Redisson's services share
// it; docs/redisson.md tables it). TestRedisLayout drives every primitive
// into a typical state and records the keys it leaves: their names (the
// primitive's name is <name>, ids are <owner>, <request-id>, <runtime-id>),
// Redis types, whether they expire, a hash's fields, and the channels.
// The record must equal testdata/redis-layout.golden, and CHANGELOG.md
// must name the golden's digest. An intentional change of the layout is
// then two steps: go test ./tests -run TestRedisLayout -update-layout, and
// a CHANGELOG line that names the new digest ("Redis layout <digest>: ...").
func TestRedisLayout(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	// The runtime's record is written just after New, off the caller.
	require.Eventually(t, func() bool { return rdb.Exists(ctx, scripts.RuntimeKey("", rt.ID())).Val() == 1 },
		10*time.Second, 5*time.Millisecond, "the runtime's record")
	var lines []string
	for _, p := range layoutPrimitives() {
		name := "layout:" + p.kind
		release := p.drive(t, ctx, rt, name)
		lines = append(lines, layoutOf(t, ctx, rdb, p.kind, name)...)
		release()
	}
	for _, c := range []struct{ kind, channel string }{
		{"lock, fair-lock (the unlock message)", scripts.LockChannel(layoutName)},
		{"fair-lock (a waiter's turn)", scripts.FairChannel(layoutName, "<owner>")},
		{"read-write-lock", scripts.RWChannel(layoutName)},
		{"semaphore, permit-expirable-semaphore", scripts.SemaphoreChannel(layoutName)},
		{"count-down-latch", scripts.LatchChannel(layoutName)},
		{"delayed-queue", scripts.DelayChannel(layoutName)},
	} {
		lines = append(lines, fmt.Sprintf("channel of %s: %s", c.kind, strings.ReplaceAll(c.channel, layoutName, "<name>")))
	}
	got := layoutHeader + strings.Join(lines, "\n") + "\n"

	if *updateLayout {
		require.NoError(t, os.WriteFile(layoutGolden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(layoutGolden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "the Redis layout changed: if on purpose, run go test ./tests -run TestRedisLayout -update-layout and say so in CHANGELOG.md")
	digest := layoutDigest(want)
	changelog, err := os.ReadFile("../CHANGELOG.md")
	require.NoError(t, err)
	assert.Contains(t, string(changelog), "Redis layout "+digest,
		"CHANGELOG.md does not name the layout of %s: add a line \"Redis layout %s: <what changed>\" (Unreleased)", layoutGolden, digest)
}

// layoutName stands for a primitive's name in the channels' record.
const layoutName = "NAME"

const layoutHeader = `# The Redis layout of each primitive, as TestRedisLayout records it: each
# key a primitive leaves in a typical state (<name> is the primitive's
# name), its Redis type, whether it expires, and a hash's fields; then the
# channels. A change here is a change of the layout Redisson services
# share: CHANGELOG.md names this file's digest (TestRedisLayout says it).
`

// layoutDigest is the first 12 hex digits of the golden's SHA-256.
func layoutDigest(golden []byte) string {
	sum := sha256.Sum256(golden)
	return hex.EncodeToString(sum[:])[:12]
}

type layoutPrimitive struct {
	kind  string
	drive func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, name string) (release func())
}

func layoutPrimitives() []layoutPrimitive {
	nothing := func() {}
	return []layoutPrimitive{
		{"lock", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			h, err := rt.Lock(n).Acquire(ctx)
			require.NoError(t, err)
			return func() { require.NoError(t, h.Unlock(ctx)) }
		}},
		{"fair-lock", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			h, err := rt.FairLock(n).Acquire(ctx)
			require.NoError(t, err)
			waitCtx, cancel := context.WithCancel(ctx)
			waited := make(chan struct{})
			go func() { _, _ = rt.FairLock(n).Acquire(waitCtx); close(waited) }()
			require.Eventually(t, func() bool {
				w, err := rt.FairLock(n).Waiters(ctx)
				return err == nil && len(w) == 1
			}, 10*time.Second, 5*time.Millisecond)
			return func() { cancel(); <-waited; require.NoError(t, h.Unlock(ctx)) }
		}},
		{"read-write-lock-read", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			h, err := rt.ReadWriteLock(n).ReadLocker().Acquire(ctx)
			require.NoError(t, err)
			return func() { require.NoError(t, h.Unlock(ctx)) }
		}},
		{"read-write-lock-write", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			h, err := rt.ReadWriteLock(n).WriteLocker().Acquire(ctx)
			require.NoError(t, err)
			return func() { require.NoError(t, h.Unlock(ctx)) }
		}},
		{"semaphore", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			_, err := rt.Semaphore(n).TrySetPermits(ctx, 3)
			require.NoError(t, err)
			require.NoError(t, rt.Semaphore(n).Acquire(ctx, 1))
			return nothing
		}},
		{"permit-expirable-semaphore", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			_, err := rt.PermitExpirableSemaphore(n).TrySetPermits(ctx, 3)
			require.NoError(t, err)
			_, err = rt.PermitExpirableSemaphore(n).Acquire(ctx, time.Minute)
			require.NoError(t, err)
			return nothing
		}},
		{"count-down-latch", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			_, err := rt.CountDownLatch(n).TrySetCount(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, rt.CountDownLatch(n).CountDown(ctx))
			return nothing
		}},
		{"queue", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			require.NoError(t, rt.BlockingQueue(n).Offer(ctx, []byte("x")))
			return nothing
		}},
		{"delayed-queue", func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n string) func() {
			q := rt.DelayedQueue(n)
			require.NoError(t, q.Offer(ctx, []byte("later"), time.Hour))
			require.NoError(t, q.Offer(ctx, []byte("now"), 0))
			require.Eventually(t, func() bool { n, err := rt.BlockingQueue(n).Len(ctx); return err == nil && n == 1 },
				10*time.Second, 5*time.Millisecond, "the due item reaches the list")
			return func() { _ = q.Close() }
		}},
	}
}

var (
	// layoutOwner is an owner id, or a request id, "<runtime id>:<n>".
	layoutOwner   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+`)
	layoutRuntime = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// layoutOf lists the keys of name (and the runtime's record), normalized,
// one line each: "<kind>: <key> <type> <expires|persistent> [fields]".
func layoutOf(t *testing.T, ctx context.Context, rdb *redis.Client, kind, name string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if !strings.Contains(key, name) && !(kind == "lock" && strings.HasPrefix(key, "actorlock_runtime:")) {
			continue
		}
		typ := rdb.Type(ctx, key).Val()
		expiry := "persistent"
		if rdb.PTTL(ctx, key).Val() > 0 {
			expiry = "expires"
		}
		norm := strings.ReplaceAll(key, name, "<name>")
		if strings.HasPrefix(norm, "actorlock_request:") {
			norm = layoutOwner.ReplaceAllString(norm, "<request-id>")
		}
		norm = layoutOwner.ReplaceAllString(norm, "<owner>")
		norm = layoutRuntime.ReplaceAllString(norm, "<runtime-id>")
		owner := kind
		if strings.HasPrefix(key, "actorlock_runtime:") {
			owner = "runtime" // its record, which every runtime keeps
		}
		line := fmt.Sprintf("%s: %s %s %s", owner, norm, typ, expiry)
		if typ == "hash" {
			fields := rdb.HKeys(ctx, key).Val()
			for i, f := range fields {
				fields[i] = layoutOwner.ReplaceAllString(f, "<owner>")
			}
			sort.Strings(fields)
			line += " fields " + strings.Join(fields, ",")
		}
		out = append(out, line)
	}
	require.NoError(t, iter.Err())
	sort.Strings(out)
	return dedupe(out)
}

func dedupe(lines []string) []string {
	var out []string
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return out
}
