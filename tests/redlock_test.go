package tests

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

func TestRedLockSurvivesAMinorityOfDeadMasters(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	require.NoError(t, ms.srvs[1].Kill())
	require.NoError(t, ms.srvs[3].Kill())
	g, err := actorlock.RedLock(ms.locks("red")...).Acquire(ctx, actorlock.WaitTime(3*time.Second))
	require.NoError(t, err, "3 of 5 masters are a majority")
	assert.Len(t, g.Members(), 3)
	require.NoError(t, g.Unlock(ctx))

	require.NoError(t, ms.srvs[4].Kill())
	start := time.Now()
	_, err = actorlock.RedLock(ms.locks("red")...).Acquire(ctx, actorlock.WaitTime(time.Second))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired, "2 of 5 masters are not")
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, time.Second-10*time.Millisecond)
	assert.Less(t, took, 1300*time.Millisecond, "within the wait time")
	for _, i := range []int{0, 2} {
		assert.Zero(t, ms.rdbs[i].Exists(ctx, "red").Val(), "nothing left held on master %d", i)
	}
}

// A frozen master (SIGSTOP) costs an acquisition no more than the
// per-master attempt timeout.
func TestRedLockDoesNotStallOnAFrozenMaster(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	require.NoError(t, ms.srvs[2].Pause())
	defer ms.srvs[2].Resume()
	start := time.Now()
	g, err := actorlock.RedLock(ms.locks("frozen")...).Acquire(ctx, actorlock.LeaseTime(2*time.Second), actorlock.WaitTime(5*time.Second))
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("acquired in %v with one master frozen (attempt timeout for a 2 s lease: 100ms)", took)
	assert.Less(t, took, 300*time.Millisecond)
	assert.Len(t, g.Members(), 4)
	require.NoError(t, g.Unlock(ctx))
	require.NoError(t, ms.srvs[2].Resume())
}

// 10 owners, 5 rounds each of read, sleep, write on a counter under the
// RedLock: no update is lost.
func TestRedLockMutualExclusion(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 5)
	ctx := ctxFor(t, 2*time.Minute)
	counter := ms.rdbs[0]
	var rec recorder
	var wg sync.WaitGroup
	for owner := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			red := actorlock.RedLock(ms.locks("counter-lock")...)
			for range 5 {
				g, err := red.Acquire(ctx, actorlock.LeaseTime(2*time.Second), actorlock.WaitTime(time.Minute))
				if !assert.NoError(t, err) {
					return
				}
				start := time.Now().UnixNano()
				n, err := counter.Get(ctx, "counter").Int()
				if err != nil && err != redis.Nil {
					assert.NoError(t, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
				assert.NoError(t, counter.Set(ctx, "counter", n+1, 0).Err())
				rec.add(section{Owner: string(rune('a' + owner)), Start: start, End: time.Now().UnixNano()})
				assert.NoError(t, g.Unlock(ctx))
			}
		}()
	}
	wg.Wait()
	n, err := counter.Get(ctx, "counter").Int()
	require.NoError(t, err)
	assert.Equal(t, 50, n)
	assertNoOverlap(t, rec.sections) // a RedLock's members' tokens are per master, not one sequence
}

// With a majority of masters gone, the watchdog cannot renew a majority
// and the RedLock is lost.
func TestRedLockLostWithTheMajority(t *testing.T) {
	t.Parallel()
	// 2 s: with 1 s, a renewal round over the four live masters, under
	// -race beside the suite, came back after the validity it renewed for.
	const lease = 2 * time.Second
	ms := startMasters(t, 5, actorlock.WithWatchdog(lease), actorlock.WithCallTimeout(300*time.Millisecond))
	ctx := ctxFor(t, 20*time.Second)
	g, err := actorlock.RedLock(ms.locks("majority")...).Acquire(ctx, actorlock.WaitTime(3*time.Second))
	require.NoError(t, err)
	require.NoError(t, ms.srvs[0].Kill())
	time.Sleep(2 * lease)
	select {
	case <-g.Done():
		t.Fatalf("lost with 4 of 5 masters: %v", g.Err())
	default:
	}
	require.NoError(t, ms.srvs[1].Kill())
	require.NoError(t, ms.srvs[2].Kill())
	select {
	case <-g.Done():
	case <-time.After(lease + time.Second):
		t.Fatal("Done did not close once the majority was gone")
	}
	assert.ErrorIs(t, g.Err(), actorlock.ErrLost)
}
