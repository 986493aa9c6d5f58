package sim

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// dropReplyOnce loses the reply of the first call of one lock script, after
// it ran (as a connection that breaks after the write would).
type dropReplyOnce struct {
	script string
	done   atomic.Bool
	// thenRefuse: the call after it fails before it is sent (a dial
	// error, final for the runtime).
	thenRefuse bool
	refused    atomic.Bool
}

func (d *dropReplyOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *dropReplyOnce) is(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if sc, ok := scriptCallOf(c); ok && sc.script == d.script {
			return true
		}
	}
	return false
}

func (d *dropReplyOnce) hit(cmds []redis.Cmder) bool {
	return d.is(cmds) && d.done.CompareAndSwap(false, true)
}

// refuse: the call after the dropped one never leaves.
func (d *dropReplyOnce) refuse(cmds []redis.Cmder) bool {
	return d.thenRefuse && d.done.Load() && d.is(cmds) && d.refused.CompareAndSwap(false, true)
}

func (d *dropReplyOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d.refuse([]redis.Cmder{cmd}) {
			cmd.SetErr(dialError())
			return cmd.Err()
		}
		err := next(ctx, cmd)
		if d.hit([]redis.Cmder{cmd}) {
			err = readTimeoutError()
			cmd.SetErr(err)
		}
		return err
	}
}

func (d *dropReplyOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if d.refuse(cmds) {
			for _, c := range cmds {
				c.SetErr(dialError())
			}
			return dialError()
		}
		err := next(ctx, cmds)
		if d.hit(cmds) {
			err = readTimeoutError()
			for _, c := range cmds {
				c.SetErr(err)
			}
		}
		return err
	}
}

// TestHandoffWhoseReplyIsLost: a local hand-off (or fair unlock handing to
// the next local waiter) whose reply is lost after it ran: the waiter it
// went to holds the lock, and its one Unlock frees it (the retry must not
// count the hold twice). The simulation saw the lock stay held by the
// waiter after such a lost reply (seed 1 sim1:lock:63, seed 2
// sim2:fair:175) in a busier interleaving, not reduced yet; this plain case
// holds on today's main.
func TestHandoffWhoseReplyIsLost(t *testing.T) {
	for _, v := range []struct {
		script     string
		thenRefuse bool
	}{{"lock_handoff", false}, {"fair_unlock", false}, {"lock_handoff", true}, {"fair_unlock", true}} {
		script := v.script
		t.Run(fmt.Sprintf("%s/retry-refused=%v", script, v.thenRefuse), func(t *testing.T) {
			srv, err := redisserver.Start()
			require.NoError(t, err)
			defer srv.Close()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer rdb.Close()
			drop := &dropReplyOnce{script: script, thenRefuse: v.thenRefuse}
			rdb.AddHook(drop)
			check := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer check.Close()
			rt, err := actorlock.New(rdb)
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = rt.Close(ctx)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l := rt.Lock("handoff")
			if script == "fair_unlock" {
				l = rt.FairLock("handoff")
			}
			h1, err := l.Acquire(ctx)
			require.NoError(t, err)
			got := make(chan *actorlock.Held, 1)
			go func() {
				h2, err := l.Acquire(ctx)
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				got <- h2
			}()
			// The waiter is queued once the lock actor knows of it.
			require.Eventually(t, func() bool {
				ws, err := l.Waiters(ctx)
				return err == nil && len(ws) > 0 || script == "lock_handoff"
			}, 5*time.Second, 10*time.Millisecond)
			time.Sleep(100 * time.Millisecond)
			if err := h1.Unlock(ctx); err != nil {
				// The release failed as far as the caller knows: it
				// calls again, as the README says.
				t.Logf("first Unlock: %v", err)
				require.NoError(t, h1.Unlock(ctx))
			}
			h2 := <-got
			require.NotNil(t, h2)
			require.True(t, drop.done.Load(), "the %s reply was not dropped: the test did not reach its interleaving", script)
			require.NoError(t, h2.Unlock(ctx))
			n, err := check.HGet(ctx, "handoff", h2.Owner()).Result()
			if err != redis.Nil {
				require.NoError(t, err)
				t.Fatalf("%s: after the hand-off's lost reply, the waiter's single Unlock returned nil, yet Redis still counts %s for it", script, n)
			}
		})
	}
}
