package tests

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// errorShape is the one shape of the errors the public API returns:
// `actorlock: <operation> "<name>": <cause>`, or without the name for a call
// on no name (New, Close, a MultiLock).
var errorShape = regexp.MustCompile(`^actorlock: [a-z][a-zA-Z ]*( "[^"]*")?: `)

// TestErrorShape provokes every public error path it can and checks that
// each error is wrapped once, in the one shape, with its sentinels and
// causes still matchable with errors.Is.
func TestErrorShape(t *testing.T) {
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 2*time.Minute)
	other := newRuntime(t, client(t, srv.Addr)) // another process on the same Redis

	// Held by an owner other than any fresh acquisition's.
	holdOther := func(t *testing.T, name string) {
		t.Helper()
		h, err := other.Lock(name).Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Unlock(context.Background()) })
	}
	var nilCtx context.Context // a nil context, as a careless caller passes

	type errCase struct {
		name    string  // the case
		subject string  // the name the error is about, "" for none
		want    []error // errors.Is must hold for each
		provoke func(t *testing.T) error
	}
	cases := []errCase{
		{"acquire: WaitTime over", "err:wait", []error{actorlock.ErrNotAcquired}, func(t *testing.T) error {
			holdOther(t, "err:wait")
			_, err := rt.Lock("err:wait").Acquire(ctx, actorlock.WaitTime(200*time.Millisecond))
			return err
		}},
		{"acquire: ctx deadline", "err:ctx", []error{context.DeadlineExceeded}, func(t *testing.T) error {
			holdOther(t, "err:ctx")
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := rt.Lock("err:ctx").Acquire(cctx)
			return err
		}},
		{"acquire: ctx cancelled", "err:cancel", []error{context.Canceled}, func(t *testing.T) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := rt.Lock("err:cancel").Acquire(cctx)
			return err
		}},
		{"try acquire: held by another", "err:try", []error{actorlock.ErrNotAcquired}, func(t *testing.T) error {
			holdOther(t, "err:try")
			_, err := rt.Lock("err:try").TryAcquire(ctx)
			return err
		}},
		{"try acquire: with WaitTime", "err:trywait", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("err:trywait").TryAcquire(ctx, actorlock.WaitTime(time.Second))
			return err
		}},
		{"try acquire: upgrade", "config", []error{actorlock.ErrNotAcquired, actorlock.ErrUpgrade}, func(t *testing.T) error {
			rw := rt.ReadWriteLock("config")
			r, err := rw.ReadLocker().Acquire(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Unlock(ctx)) }()
			_, err = rw.WriteLocker().TryAcquire(r.Context())
			return err
		}},
		{"acquire: bad name", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("").Acquire(ctx)
			return err
		}},
		{"acquire: bad option", "err:lease", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("err:lease").Acquire(ctx, actorlock.LeaseTime(time.Millisecond))
			return err
		}},
		{"acquire: nil ctx", "err:nilctx", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("err:nilctx").Acquire(nilCtx)
			return err
		}},
		{"acquire: another kind", "err:kind", []error{actorlock.ErrWrongKind}, func(t *testing.T) error {
			holdOther(t, "err:kind")
			_, err := rt.ReadWriteLock("err:kind").ReadLocker().TryAcquire(ctx)
			return err
		}},
		{"acquire: key of another Redis type", "err:type", []error{actorlock.ErrWrongKind}, func(t *testing.T) error {
			require.NoError(t, rdb.Set(ctx, "err:type", "x", 0).Err())
			_, err := rt.Lock("err:type").TryAcquire(ctx)
			return err
		}},
		{"unlock: twice", "err:twice", []error{actorlock.ErrUnlocked}, func(t *testing.T) error {
			h, err := rt.Lock("err:twice").Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, h.Unlock(ctx))
			return h.Unlock(ctx)
		}},
		{"unlock: after loss", "err:lost", []error{actorlock.ErrLost}, func(t *testing.T) error {
			h, err := rt.Lock("err:lost").Acquire(ctx)
			require.NoError(t, err)
			was, err := other.Lock("err:lost").ForceUnlock(ctx)
			require.NoError(t, err)
			require.True(t, was, "the hold was there to lose")
			select {
			case <-h.Done():
			case <-ctx.Done():
				t.Fatal("the hold did not end")
			}
			return h.Unlock(ctx)
		}},
		{"unlock: taken by another owner", "err:taken", []error{actorlock.ErrLost, actorlock.ErrNotOwner}, func(t *testing.T) error {
			h, err := rt.Lock("err:taken").Acquire(ctx)
			require.NoError(t, err)
			// Deleted behind the runtime's back (no unlock message), then
			// taken: the unlock finds another owner.
			require.NoError(t, rdb.Del(ctx, "err:taken").Err())
			holdOther(t, "err:taken")
			return h.Unlock(ctx)
		}},
		{"unlock: nil ctx", "err:unlocknil", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			h, err := rt.Lock("err:unlocknil").Acquire(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, h.Unlock(ctx)) }()
			return h.Unlock(nilCtx)
		}},
		{"extend: watchdog hold", "err:extend", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			h, err := rt.Lock("err:extend").Acquire(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, h.Unlock(ctx)) }()
			return h.Extend(ctx, 10*time.Second)
		}},
		{"extend: too short", "err:extendshort", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			h, err := rt.Lock("err:extendshort").Acquire(ctx, actorlock.LeaseTime(10*time.Second))
			require.NoError(t, err)
			defer func() { require.NoError(t, h.Unlock(ctx)) }()
			return h.Extend(ctx, time.Millisecond)
		}},
		{"is locked: nil ctx", "err:islocked", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("err:islocked").IsLocked(nilCtx)
			return err
		}},
		{"remain TTL: bad name", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("").RemainTTL(ctx)
			return err
		}},
		{"holders: key of another Redis type", "err:holders", []error{actorlock.ErrWrongKind}, func(t *testing.T) error {
			require.NoError(t, rdb.Set(ctx, "err:holders", "x", 0).Err())
			_, err := rt.Lock("err:holders").Holders(ctx)
			return err
		}},
		{"waiters: not a fair lock", "err:waiters", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Lock("err:waiters").Waiters(ctx)
			return err
		}},
		{"do: nil function", "err:do", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			return rt.Lock("err:do").Do(ctx, nil)
		}},
		{"do: refused", "err:dotry", []error{actorlock.ErrNotAcquired}, func(t *testing.T) error {
			holdOther(t, "err:dotry")
			return rt.Lock("err:dotry").Do(ctx, func(context.Context) error { return nil }, actorlock.WaitTime(0))
		}},
		{"locker: bad name", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Locker("")
			return err
		}},
		{"locker: unlock without lock", "err:locker", []error{actorlock.ErrUnlocked}, func(t *testing.T) error {
			k, err := rt.Locker("err:locker")
			require.NoError(t, err)
			k.Unlock()
			return k.Err()
		}},
		{"MultiLock: member refused", "", []error{actorlock.ErrNotAcquired}, func(t *testing.T) error {
			holdOther(t, "acct:2")
			_, err := actorlock.MultiLock(rt.Lock("acct:1"), rt.Lock("acct:2")).TryAcquire(ctx)
			return err
		}},
		{"MultiLock: no members", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := actorlock.MultiLock().Acquire(ctx)
			return err
		}},
		{"MultiLock: unlock twice", "", []error{actorlock.ErrUnlocked}, func(t *testing.T) error {
			g, err := actorlock.MultiLock(rt.Lock("acct:3"), rt.Lock("acct:4")).Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, g.Unlock(ctx))
			return g.Unlock(ctx)
		}},
		{"MultiLock: unlock of a member taken", "acct:6", []error{actorlock.ErrLost, actorlock.ErrNotOwner}, func(t *testing.T) error {
			g, err := actorlock.MultiLock(rt.Lock("acct:5"), rt.Lock("acct:6")).Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, "acct:6").Err())
			holdOther(t, "acct:6")
			return g.Unlock(ctx)
		}},
		{"semaphore: negative permits", "err:sem", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			return rt.Semaphore("err:sem").Release(ctx, -1)
		}},
		{"semaphore: try acquire negative", "err:sem", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.Semaphore("err:sem").TryAcquire(ctx, -1)
			return err
		}},
		{"semaphore: acquire ctx deadline", "err:semwait", []error{context.DeadlineExceeded}, func(t *testing.T) error {
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			return rt.Semaphore("err:semwait").Acquire(cctx, 1)
		}},
		{"permit semaphore: bad permits", "err:psem", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.PermitExpirableSemaphore("err:psem").AcquirePermits(ctx, 0, time.Second)
			return err
		}},
		{"permit semaphore: release of a permit not held", "err:psem", []error{actorlock.ErrPermitExpired}, func(t *testing.T) error {
			s := rt.PermitExpirableSemaphore("err:psem")
			_, err := s.TrySetPermits(ctx, 1)
			require.NoError(t, err)
			id, err := s.Acquire(ctx, 10*time.Second)
			require.NoError(t, err)
			require.NoError(t, s.Release(ctx, id))
			return s.Release(ctx, id)
		}},
		{"permit semaphore: update lease of a permit not held", "err:psem", []error{actorlock.ErrPermitExpired}, func(t *testing.T) error {
			return rt.PermitExpirableSemaphore("err:psem").UpdateLeaseTime(ctx, strings.Repeat("ab", 16), time.Second)
		}},
		{"latch: bad count", "err:latch", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := rt.CountDownLatch("err:latch").TrySetCount(ctx, 0)
			return err
		}},
		{"latch: key of another Redis type", "err:latchtype", nil, func(t *testing.T) error {
			require.NoError(t, rdb.HSet(ctx, "err:latchtype", "f", "v").Err())
			_, err := rt.CountDownLatch("err:latchtype").Count(ctx)
			return err
		}},
		{"queue: handle closed", "err:dq", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			q := rt.DelayedQueue("err:dq")
			require.NoError(t, q.Close())
			return q.Offer(ctx, []byte("x"), time.Second)
		}},
		{"queue: negative delay", "err:dq2", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			q := rt.DelayedQueue("err:dq2")
			defer func() { _ = q.Close() }()
			return q.Offer(ctx, []byte("x"), -time.Second)
		}},
		{"queue: take ctx deadline", "err:bq", []error{context.DeadlineExceeded}, func(t *testing.T) error {
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := rt.BlockingQueue("err:bq").Take(cctx)
			return err
		}},
		{"new: nil client", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := actorlock.New(nil)
			return err
		}},
		{"new: nil option", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			_, err := actorlock.New(rdb, nil)
			return err
		}},
		{"close: nil ctx", "", []error{actorlock.ErrInvalidArgument}, func(t *testing.T) error {
			return rt.Close(nilCtx)
		}},
	}

	// Calls after Close, on a runtime of their own.
	closed := newRuntime(t, rdb)
	closedHeld, err := closed.Lock("err:closedheld").Acquire(ctx)
	require.NoError(t, err)
	closedQueue := closed.DelayedQueue("err:closedq")
	require.NoError(t, closed.Close(ctx))
	cases = append(cases,
		errCase{"closed: acquire", "err:closed", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			_, err := closed.Lock("err:closed").Acquire(ctx)
			return err
		}},
		errCase{"closed: unlock", "err:closedheld", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			return closedHeld.Unlock(ctx)
		}},
		errCase{"closed: locker", "err:closedlocker", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			_, err := closed.Locker("err:closedlocker")
			return err
		}},
		errCase{"closed: semaphore", "err:closedsem", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			_, err := closed.Semaphore("err:closedsem").Available(ctx)
			return err
		}},
		errCase{"closed: latch", "err:closedlatch", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			return closed.CountDownLatch("err:closedlatch").Await(ctx)
		}},
		errCase{"closed: queue", "err:closedq", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			_, _, err := closedQueue.Poll(ctx)
			return err
		}},
		errCase{"closed: MultiLock", "", []error{actorlock.ErrClosed}, func(t *testing.T) error {
			_, err := actorlock.MultiLock(closed.Lock("err:cm1"), closed.Lock("err:cm2")).Acquire(ctx)
			return err
		}},
	)

	// A RedLock refused: two of its three masters held by others.
	var reds [3]*actorlock.Runtime
	var redLocks [3]*actorlock.Lock
	for i := range reds {
		s := startRedis(t)
		reds[i] = newRuntime(t, client(t, s.Addr))
		redLocks[i] = reds[i].Lock("red:" + string(rune('a'+i)))
	}
	cases = append(cases, errCase{"RedLock: refused", "", []error{actorlock.ErrNotAcquired}, func(t *testing.T) error {
		for i := range 2 {
			h, err := reds[i].Lock(redLocks[i].Name()).Acquire(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, h.Unlock(ctx)) }()
		}
		_, err := actorlock.RedLock(redLocks[:]...).TryAcquire(ctx)
		return err
	}})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.provoke(t)
			require.Error(t, err)
			for _, w := range c.want {
				assert.ErrorIs(t, err, w)
			}
			text := err.Error()
			t.Logf("%s", text)
			assert.Regexp(t, errorShape, text, "the one shape")
			assert.Equal(t, 1, strings.Count(text, "actorlock: "), "the prefix once: %s", text)
			if c.subject != "" {
				assert.Equal(t, 1, strings.Count(text, `"`+c.subject+`"`), "the name once, quoted: %s", text)
				assert.True(t, strings.HasPrefix(text, "actorlock: "), text)
			}
			assert.NotContains(t, text, "\n", "one line")
		})
	}
}

// TestErrorShapeRedisError: an error whose cause is Redis unreachable keeps
// that cause matchable (errors.As), in the one shape.
func TestErrorShapeRedisError(t *testing.T) {
	srv, _, rt := setup(t, actorlock.WithCallTimeout(2*time.Second))
	ctx := ctxFor(t, time.Minute)
	require.NoError(t, srv.Close())
	_, err := rt.Lock("err:down").IsLocked(ctx)
	require.Error(t, err)
	t.Logf("%s", err)
	assert.Regexp(t, errorShape, err.Error())
	assert.Equal(t, 1, strings.Count(err.Error(), "actorlock: "))
	var netErr *net.OpError
	assert.ErrorAs(t, err, &netErr, "the dial error")
}

// Issue 32 item 4: an error shows at most the first 100 bytes of a name,
// with the name's length: a 70,000-byte name (refused: over 64 KiB) and a
// 60,000-byte one (valid) give errors of a few hundred bytes, through
// every kind of handle and error path. An empty name is an empty name,
// whatever the primitive; a release of one permit says "1 permit".
func TestErrorsShowNamesShortAndWordsRight(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const maxLen = 400
	short := func(t *testing.T, err error, name string) {
		t.Helper()
		require.Error(t, err)
		assert.Less(t, len(err.Error()), maxLen, "%.300s", err)
		assert.Contains(t, err.Error(), fmt.Sprintf("%s (%d bytes)", strconv.Quote(name[:100]+"…"), len(name)), "the name's start, and its length")
	}
	calls := map[string]func(name string) error{
		"lock": func(n string) error { _, err := rt.Lock(n).TryAcquire(ctx); return err },
		"fair": func(n string) error { _, err := rt.FairLock(n).TryAcquire(ctx); return err },
		"rw":   func(n string) error { _, err := rt.ReadWriteLock(n).WriteLocker().TryAcquire(ctx); return err },
		"semaphore": func(n string) error {
			_, err := rt.Semaphore(n).TrySetPermits(ctx, 1)
			return err
		},
		"permit-expirable": func(n string) error { _, err := rt.PermitExpirableSemaphore(n).Available(ctx); return err },
		"latch":            func(n string) error { return rt.CountDownLatch(n).CountDown(ctx) },
		"queue":            func(n string) error { return rt.BlockingQueue(n).Offer(ctx, []byte("x")) },
		"delayed": func(n string) error {
			q := rt.DelayedQueue(n)
			defer q.Close()
			return q.Offer(ctx, []byte("x"), 0)
		},
		"locker": func(n string) error { _, err := rt.Locker(n); return err },
	}
	tooLong := strings.Repeat("n", 70_000)
	for what, call := range calls {
		t.Run("too-long/"+what, func(t *testing.T) {
			err := call(tooLong)
			assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
			short(t, err, tooLong)
		})
	}
	long := strings.Repeat("v", 60_000)
	t.Run("long/not-acquired", func(t *testing.T) {
		h, err := rt.Lock(long).Acquire(ctx)
		require.NoError(t, err)
		defer func() { _ = h.Unlock(ctx) }()
		_, err = rt.Lock(long).TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
		short(t, err, long)
		_, err = rt.Semaphore(long).TrySetPermits(ctx, 1)
		assert.ErrorIs(t, err, actorlock.ErrWrongKind)
		short(t, err, long)
		_, err = actorlock.MultiLock(rt.Lock("other"), rt.Lock(long)).TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
		short(t, err, long)
	})
	t.Run("long/no-hash-tag", func(t *testing.T) {
		name := "{" + long
		_, err := rt.Lock(name).TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		assert.Less(t, len(err.Error()), maxLen, "%.300s", err)
	})
	t.Run("empty", func(t *testing.T) {
		for what, call := range calls {
			err := call("")
			assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, what)
			assert.ErrorContains(t, err, "empty name", what)
			assert.NotContains(t, err.Error(), "lock name", what)
		}
	})
	t.Run("one-permit", func(t *testing.T) {
		require.NoError(t, rdb.HSet(ctx, "a-hash", "f", "1").Err())
		err := rt.Semaphore("a-hash").Release(ctx, 1)
		assert.ErrorIs(t, err, actorlock.ErrWrongKind)
		assert.Contains(t, err.Error(), ": 1 permit: ")
	})
}
