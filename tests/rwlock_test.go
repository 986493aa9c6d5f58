package tests

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// 20 readers blocked behind a writer, here and in another runtime, all read
// within a second of the write unlock.
func TestReadersWaitForTheWriterThenShare(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		other := newRuntime(t, d.client(t))
		w, err := rt.ReadWriteLock("rw-share").WriteLocker().Acquire(ctx)
		require.NoError(t, err)

		const readers = 20
		reading := make(chan time.Time, readers)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := range readers {
			r := rt
			if i%2 == 1 {
				r = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := r.ReadWriteLock("rw-share").ReadLocker().Acquire(ctx, actorlock.WaitTime(10*time.Second))
				if !assert.NoError(t, err) {
					return
				}
				reading <- time.Now()
				<-release // all hold at once: readers share
				assert.NoError(t, h.Unlock(ctx))
			}()
		}
		time.Sleep(300 * time.Millisecond)
		assert.Empty(t, reading, "no reader gets in while the writer holds")
		unlocked := time.Now()
		require.NoError(t, w.Unlock(ctx))
		for range readers {
			select {
			case at := <-reading:
				assert.Less(t, at.Sub(unlocked), time.Second)
			case <-time.After(2 * time.Second):
				t.Fatal("a reader was not let in after the write unlock")
			}
		}
		n, err := rdb.HLen(ctx, "rw-share").Result()
		require.NoError(t, err)
		assert.EqualValues(t, readers+1, n, "every reader holds at once (plus the mode field)")
		close(release)
		wg.Wait()
		assert.Zero(t, rdb.Exists(ctx, "rw-share").Val())
	})
}

// Readers with leases of 10 s and 3 s, then a writer: the writer gets in
// when the longer read lease ends, not the shorter.
func TestWriterWaitsForTheLongestReadLease(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, 30*time.Second)
		_, err := rt.ReadWriteLock("rw-leases").ReadLocker().Acquire(ctx, actorlock.LeaseTime(10*time.Second))
		require.NoError(t, err)
		_, err = rt.ReadWriteLock("rw-leases").ReadLocker().Acquire(ctx, actorlock.LeaseTime(3*time.Second))
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond)
		writer := newRuntime(t, d.client(t))
		start := time.Now()
		h, err := writer.ReadWriteLock("rw-leases").WriteLocker().Acquire(ctx, actorlock.WaitTime(15*time.Second))
		require.NoError(t, err)
		took := time.Since(start)
		t.Logf("writer acquired after %v", took)
		assert.Greater(t, took, 8*time.Second)
		assert.Less(t, took, 10*time.Second)
		require.NoError(t, h.Unlock(ctx))
	})
}

// A reader whose lease ran out (it never unlocked) stops counting, even
// while another reader keeps the lock alive: one of ours is given back when
// its lease is over; one of a client that died (here written as Redisson
// writes a read hold: a hash field and its timeout key) stays in the hash
// and is ignored once its timeout key has expired.
func TestExpiredReaderDoesNotBlockWriters(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t, actorlock.WithWatchdog(time.Second))
		ctx := ctxFor(t, 20*time.Second)
		expired, err := rt.ReadWriteLock("rw-expired").ReadLocker().Acquire(ctx, actorlock.LeaseTime(time.Second))
		require.NoError(t, err)
		live, err := rt.ReadWriteLock("rw-expired").ReadLocker().Acquire(ctx) // watchdog-renewed
		require.NoError(t, err)
		const dead = "8743c9c0-0795-4907-87fd-6c719a6b4586:7"
		require.NoError(t, rdb.HIncrBy(ctx, "rw-expired", dead, 1).Err())
		require.NoError(t, rdb.Set(ctx, "{rw-expired}:"+dead+":rwlock_timeout:1", 1, time.Second).Err())
		time.Sleep(5 * time.Second)
		fields, err := rdb.HKeys(ctx, "rw-expired").Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"mode", live.Owner(), dead}, fields,
			"our expired reader was given back; the dead client's field is still in the hash")
		assert.ErrorIs(t, expired.Err(), actorlock.ErrLost)

		require.NoError(t, live.Unlock(ctx))
		h, err := rt.ReadWriteLock("rw-expired").WriteLocker().TryAcquire(ctx)
		require.NoError(t, err, "the expired reader does not count")
		require.NoError(t, h.Unlock(ctx))

		// And alone, it simply expires.
		_, err = rt.ReadWriteLock("rw-expired-alone").ReadLocker().Acquire(ctx, actorlock.LeaseTime(time.Second))
		require.NoError(t, err)
		time.Sleep(5 * time.Second)
		h, err = rt.ReadWriteLock("rw-expired-alone").WriteLocker().TryAcquire(ctx)
		require.NoError(t, err)
		require.NoError(t, h.Unlock(ctx))
	})
}

// 50 readers hold past the watchdog lease: renewed, none is lost.
func TestManyReadersAreRenewed(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t, actorlock.WithWatchdog(time.Second))
		ctx := ctxFor(t, 20*time.Second)
		var held []*actorlock.Held
		for range 50 {
			h, err := rt.ReadWriteLock("rw-many").ReadLocker().Acquire(ctx)
			require.NoError(t, err)
			held = append(held, h)
		}
		time.Sleep(3 * time.Second)
		for _, h := range held {
			select {
			case <-h.Done():
				t.Fatalf("a reader was lost: %v", h.Err())
			default:
			}
		}
		keys := d.keys(t, ctx, "{rw-many}:*:rwlock_timeout:*")
		assert.Len(t, keys, 50, "every read hold's key lives")
		for _, h := range held {
			require.NoError(t, h.Unlock(ctx))
		}
		assert.Zero(t, rdb.Exists(ctx, "rw-many").Val())
	})
}

// The writer may also read (downgrade); its read stays held, and renewed,
// after the write is released, and lets other readers in but no writer.
func TestDowngradeKeepsTheReadRenewed(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t, actorlock.WithWatchdog(time.Second))
		ctx := ctxFor(t, 40*time.Second)
		rw := rt.ReadWriteLock("rw-down")
		w, err := rw.WriteLocker().Acquire(ctx)
		require.NoError(t, err)
		r, err := rw.ReadLocker().TryAcquire(w.Context())
		require.NoError(t, err, "the writer may read")
		_, err = rt.ReadWriteLock("rw-down").ReadLocker().TryAcquire(ctx)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired, "others may not read while it writes")
		require.NoError(t, w.Unlock(ctx))
		mode, err := rdb.HGet(ctx, "rw-down", "mode").Result()
		require.NoError(t, err)
		assert.Equal(t, "read", mode)

		other, err := rt.ReadWriteLock("rw-down").ReadLocker().TryAcquire(ctx)
		require.NoError(t, err, "another reader may share the downgraded lock")
		require.NoError(t, other.Unlock(ctx))
		_, err = rt.ReadWriteLock("rw-down").WriteLocker().TryAcquire(ctx)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired, "no writer while it reads")

		for end := time.Now().Add(25 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
			select {
			case <-r.Done():
				t.Fatalf("the downgraded read was lost: %v", r.Err())
			default:
			}
			n, err := rdb.HGet(ctx, "rw-down", r.Owner()).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		require.NoError(t, r.Unlock(ctx))
		assert.Zero(t, rdb.Exists(ctx, "rw-down").Val())
	})
}

// A reader cannot upgrade: refused at once without a wait time, at the wait
// time with one; never a deadlock.
func TestUpgradeIsRefusedNotDeadlocked(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		rw := rt.ReadWriteLock("rw-up")
		r, err := rw.ReadLocker().Acquire(ctx)
		require.NoError(t, err)

		start := time.Now()
		_, err = rw.WriteLocker().TryAcquire(r.Context())
		require.ErrorIs(t, err, actorlock.ErrUpgrade)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		_, err = rw.WriteLocker().Acquire(r.Context())
		require.ErrorIs(t, err, actorlock.ErrUpgrade)
		assert.Less(t, time.Since(start), 100*time.Millisecond, "at once without a wait time")

		start = time.Now()
		_, err = rw.WriteLocker().Acquire(r.Context(), actorlock.WaitTime(500*time.Millisecond))
		require.ErrorIs(t, err, actorlock.ErrUpgrade)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 490*time.Millisecond)
		assert.Less(t, took, 700*time.Millisecond, "at the wait time")
		require.NoError(t, r.Unlock(ctx))
		w, err := rw.WriteLocker().TryAcquire(ctx)
		require.NoError(t, err, "once the read is released, the write is free")
		require.NoError(t, w.Unlock(ctx))
	})
}

// A reader in a process that dies is cleaned up: a writer elsewhere gets the
// lock once the reader's lease has run out.
func TestDeadClientsReaderIsCleaned(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const lease = 2 * time.Second
		_, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		w := spawn(t, "read", with(d.workerEnv(), map[string]string{"LOCK_NAME": "rw-dead", "WATCHDOG_MS": "2000"}))
		w.expect(t, "READING", 10*time.Second)
		time.Sleep(time.Second) // renewed at least once
		require.NoError(t, w.cmd.Process.Kill())
		killed := time.Now()
		h, err := rt.ReadWriteLock("rw-dead").WriteLocker().Acquire(ctx, actorlock.WaitTime(10*time.Second))
		require.NoError(t, err)
		assert.Less(t, time.Since(killed), lease+time.Second)
		require.NoError(t, h.Unlock(ctx))
	})
}

func TestReadWriteLockWithBracesInTheName(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		rw := rt.ReadWriteLock("{test}:abc:key")
		r, err := rw.ReadLocker().Acquire(ctx)
		require.NoError(t, err)
		n, err := rdb.Exists(ctx, "{test}:abc:key:"+r.Owner()+":rwlock_timeout:1").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the read-hold key uses the name as is")
		require.NoError(t, r.Unlock(ctx))
		w, err := rw.WriteLocker().Acquire(ctx)
		require.NoError(t, err)
		locked, err := rw.WriteLocker().IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		locked, err = rw.ReadLocker().IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "IsLocked of a side: held in its own mode")
		require.NoError(t, w.Unlock(ctx))
	})
}

// A holder paused past its lease (SIGSTOP) resumes and writes: the resource
// rejects its stale token, because the next holder wrote with a higher one.
func TestFencingTokenRejectsAStaleHolder(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 30*time.Second)
		w := spawn(t, "fenced", with(d.workerEnv(), map[string]string{
			"LOCK_NAME": "fenced", "WATCHDOG_MS": "1000", "HOLD_MS": "3000",
		}))
		stale, err := strconv.ParseInt(w.expect(t, "ACQUIRED", 10*time.Second), 10, 64)
		require.NoError(t, err)
		require.NoError(t, w.cmd.Process.Signal(sigStop))
		h, err := rt.Lock("fenced").Acquire(ctx, actorlock.WaitTime(5*time.Second)) // after the paused holder's lease
		require.NoError(t, err)
		assert.Greater(t, h.Token(), stale)
		ok, err := fencedWrite(ctx, rdb, "resource", h.Token(), "current holder")
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, w.cmd.Process.Signal(sigCont))

		verdict := w.expect(t, "WRITE", 10*time.Second)
		assert.True(t, strings.HasPrefix(verdict, "rejected"), "the stale holder's write: %s", verdict)
		assert.Contains(t, verdict, "lost=true", "and it learned that it had lost the lock")
		v, err := rdb.HGet(ctx, "resource", "value").Result()
		require.NoError(t, err)
		assert.Equal(t, "current holder", v)
		require.NoError(t, h.Unlock(ctx))
	})
}

// FAIR, READ and WRITE work by message, with the same ownership rules.
func TestLockKindsByMessage(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		sys := actorkit.System(rt)
		r1, r2, wr := spawnProbe(t, sys), spawnProbe(t, sys), spawnProbe(t, sys)
		acquire := func(p *probe, id string, kind messages.Kind, wait int64) *messages.AcquireResponse {
			p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: id, Name: "msg-rw", Kind: kind, WaitMs: wait})
			return receive[*messages.AcquireResponse](t, p, 3*time.Second)
		}
		read1 := acquire(r1, "1", messages.Kind_KIND_READ, 0)
		require.True(t, read1.Acquired)
		read2 := acquire(r2, "1", messages.Kind_KIND_READ, 0)
		require.True(t, read2.Acquired, "readers share")
		assert.False(t, acquire(wr, "1", messages.Kind_KIND_WRITE, 0).Acquired, "no writer while they read")

		// A waiting writer gets it when both readers have released.
		wrToken := actorkit.NewOwnerToken()
		wr.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "2", Name: "msg-rw", Kind: messages.Kind_KIND_WRITE, WaitMs: 5000, OwnerToken: wrToken})
		wr.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "3", Name: "msg-rw", Kind: messages.Kind_KIND_READ, OwnerToken: wrToken})
		rel := receive[*messages.ReleaseResponse](t, wr, 3*time.Second)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_NOT_OWNER, rel.GetError().GetCode(), "a writer cannot release readers' holds")
		for i, p := range []*probe{r1, r2} {
			token := []string{read1.OwnerToken, read2.OwnerToken}[i]
			p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "9", Name: "msg-rw", Kind: messages.Kind_KIND_READ, OwnerToken: token})
			require.Nil(t, receive[*messages.ReleaseResponse](t, p, 3*time.Second).Error)
		}
		got := receive[*messages.AcquireResponse](t, wr, 3*time.Second)
		require.True(t, got.Acquired)
		mode, err := rdb.HGet(ctxFor(t, time.Second), "msg-rw", "mode").Result()
		require.NoError(t, err)
		assert.Equal(t, "write", mode)

		// A fair lock by message.
		f := spawnProbe(t, sys)
		f.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "f", Name: "msg-fair", Kind: messages.Kind_KIND_FAIR})
		fair := receive[*messages.AcquireResponse](t, f, 3*time.Second)
		require.True(t, fair.Acquired)
		f.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "g", Name: "msg-fair", Kind: messages.Kind_KIND_FAIR, OwnerToken: fair.OwnerToken})
		assert.True(t, receive[*messages.ReleaseResponse](t, f, 3*time.Second).Released)
	})
}

// A write re-entry adds its lease to what is left of the lock's TTL, as
// Redisson's write lock does (10 s, re-entered 1 s later with 10 s: about
// 19 s left).
func TestWriteReentryAddsItsLease(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	const lease = 10 * time.Second
	rw := rt.ReadWriteLock("rw-reenter-lease")
	w1, err := rw.WriteLocker().Acquire(ctx, actorlock.LeaseTime(lease))
	require.NoError(t, err)
	time.Sleep(time.Second)
	before := rdb.PTTL(ctx, "rw-reenter-lease").Val()
	w2, err := rw.WriteLocker().Acquire(w1.Context(), actorlock.LeaseTime(lease))
	require.NoError(t, err)
	after := rdb.PTTL(ctx, "rw-reenter-lease").Val()
	assert.InDelta(t, (before + lease).Seconds(), after.Seconds(), 0.5, "TTL %v before the re-entry, %v after", before, after)
	require.NoError(t, w2.Unlock(ctx))
	require.NoError(t, w1.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "rw-reenter-lease").Val())
}

// One rule for readers behind a waiting writer, the same for local and
// remote readers: a reader gets a read-held lock whenever no other owner
// writes, writers waiting or not (Redisson's read lock). A local reader
// does not wait behind a local writer that waits for the readers.
func TestReaderPassesAWriterWaitingForReaders(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"read-held here", "read-held by another runtime"} {
		t.Run(where, func(t *testing.T) {
			srv, rdb, rt := setup(t)
			other := newRuntime(t, client(t, srv.Addr))
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-pass"
			holderRT := rt
			if where != "read-held here" {
				holderRT = other
			}
			first, err := holderRT.ReadWriteLock(name).ReadLocker().Acquire(ctx)
			require.NoError(t, err)

			wrote := make(chan error, 1)
			go func() {
				w, err := rt.ReadWriteLock(name).WriteLocker().Acquire(ctx, actorlock.WaitTime(15*time.Second))
				if err == nil {
					err = w.Unlock(ctx)
				}
				wrote <- err
			}()
			time.Sleep(300 * time.Millisecond) // the writer waits (and, read-held elsewhere, was refused by Redis)
			select {
			case err := <-wrote:
				t.Fatalf("the writer returned while the lock is read-held: %v", err)
			default:
			}

			start := time.Now()
			local, err := rt.ReadWriteLock(name).ReadLocker().Acquire(ctx, actorlock.WaitTime(5*time.Second))
			require.NoError(t, err, "a local reader behind the waiting writer")
			assert.Less(t, time.Since(start), time.Second, "at once, not after the writer")
			t.Logf("the local reader got the lock after %v", time.Since(start))
			remote, err := other.ReadWriteLock(name).ReadLocker().TryAcquire(ctx)
			require.NoError(t, err, "a remote reader, by the same rule")
			assert.Equal(t, "read", rdb.HGet(ctx, name, "mode").Val())

			for _, h := range []*actorlock.Held{first, local, remote} {
				require.NoError(t, h.Unlock(ctx))
			}
			select {
			case err := <-wrote:
				require.NoError(t, err, "the writer, once the readers left")
			case <-time.After(10 * time.Second):
				t.Fatal("the writer did not get the lock once the readers left")
			}
		})
	}
}
